"""The time profile of a sweep as a table: ``tuner show NAME --profile`` and the race benchmark.

>>> from tuner import tune
>>> from tuner.profile import format_profile
>>> print(format_profile(tune.load("./results/demo").profile()))   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Mapping

_DRIVER_NAMES = {"scheduler": "scheduler decisions", "searcher": "searcher", "store": "store writes",
                 "callbacks": "callbacks (TensorBoard export, progress)"}


def format_profile(profile: Mapping[str, Any]) -> str:
    """Render :func:`tuner.execution.profiler.combine`'s profile as a plain-text table."""
    cpus = profile["cpus"]
    wall = profile["wall_s"]
    capacity = profile["capacity_cpu_s"] or 1e-9
    lines = [f"where the wall time went: {wall:.1f} s on {cpus:g} CPUs = {profile['capacity_cpu_s']:.1f} CPU-s, "
             f"{profile['trials']} trials",
             f"{'part':28} {'CPU-s':>9} {'share':>7} {'wall s':>8}"]
    for name, cpu_s in profile["rows"].items():
        lines.append(f"{name:28} {cpu_s:9.1f} {cpu_s / capacity:7.1%} {cpu_s / cpus:8.1f}")
    total = profile["total_cpu_s"]
    lines.append(f"{'total':28} {total:9.1f} {total / capacity:7.1%} {total / cpus:8.1f}"
                 f"   (wall {wall:.1f} s: parts add up to {total / capacity:.1%} of it)")
    driver = ", ".join(f"{_DRIVER_NAMES[k]} {v:.2f} s" for k, v in profile["driver"].items())
    lines.append(f"in the driver, next to the trials: {driver}")
    return "\n".join(lines)
