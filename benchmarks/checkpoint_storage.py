"""Checkpoints in object storage must not stall learning: the same PPO sweep, checkpointing every
iteration, with its checkpoints on local disk and in an S3 server (SeaweedFS, on this machine), in
one run; then how long a restore takes from each.

The work, the same for both: 2 PPO trials on CartPole-v1 (2 seeds), 2 at once, 16 iterations of
2,048 env steps, a checkpoint after every iteration, 2 kept (the others deleted where they are);
Ray started once, before the first sweep, outside the timings. The sweeps alternate (local, S3,
local, S3, ...) ``--repeat`` times; printed: each sweep's wall time, the median of each storage with
its spread, and their ratio (S3 / local). A restore: the best checkpoint of the last sweep of each
storage loaded as an agent (``algorithms.load_agent``: a download, for S3, then the trainer's
restore), median of ``--restores`` loads after one that is not timed (imports, the first connection).

    python benchmarks/checkpoint_storage.py                 # 3 pairs, several minutes
    python benchmarks/checkpoint_storage.py --repeat 1 --iterations 4   # quick
    python benchmarks/checkpoint_storage.py --remote-ms 50   # and a store 50 ms away

``--remote-ms N`` adds a third storage: a folder seen as object storage through fsspec whose every
file write and delete waits N ms first (`DistantFileSystem`): a store across a network, whose
latency a trial's upload can hide behind its next iteration while the S3 server here, on the same
2 cores, costs CPU that no overlap hides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)


class DistantFileSystem(LocalFileSystem):
    """A local folder as object storage ``latency_s`` away: each file written or deleted waits first."""

    protocol = "distant"

    def __init__(self, latency_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.latency_s = latency_s

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        path = str(path).removeprefix("distant://")  # bucket/key paths, from the machine's root
        return super()._strip_protocol(path if path.startswith("/") else "/" + path)

    def open(self, path: Any, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            time.sleep(self.latency_s)
        return super().open(path, mode, *args, **kwargs)

    def rm(self, path: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.latency_s)
        return super().rm(path, *args, **kwargs)


def sweep(storage: str, name: str, iterations: int, filesystem: Any = None) -> tuple[float, str]:
    """One sweep; (its wall seconds, its best checkpoint)."""
    from tuner import tune

    began = time.perf_counter()
    analysis = tune.run("PPO", config={"env": "CartPole-v1", "seed": tune.grid_search([0, 1]),
                                       "num_cpus_for_learner": 0.5},
                        stop={"training_iteration": iterations}, checkpoint_freq=1, keep_checkpoints_num=2,
                        metric="episode_return_mean", mode="max", storage_path=storage, name=name, verbose=0,
                        storage_filesystem=filesystem)
    wall = time.perf_counter() - began
    bad = [t.status for t in analysis.trials if t.status != "TERMINATED"]
    if bad:
        raise RuntimeError(f"sweep {name}: trials did not finish: {bad}")
    best = analysis.get_best_checkpoint().path
    analysis.close()
    return wall, best


def restore_s(checkpoint: str, times: int) -> list[float]:
    from algorithms import load_agent

    load_agent(checkpoint).stop()  # warm-up: imports, the first connection
    took = []
    for _ in range(times):
        began = time.perf_counter()
        load_agent(checkpoint).stop()
        took.append(time.perf_counter() - began)
    return took


def spread(values: list[float], fmt: str = ".1f") -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="pairs of sweeps (default 3)")
    parser.add_argument("--iterations", type=int, default=16, help="iterations per trial (default 16)")
    parser.add_argument("--restores", type=int, default=5, help="agent loads per storage (default 5)")
    parser.add_argument("--remote-ms", type=float, default=0.0,
                        help="also a store this many ms away (DistantFileSystem; default 0: none)")
    args = parser.parse_args(argv)
    for flag in ("repeat", "iterations", "restores"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}: must be >= 1, got {getattr(args, flag)}")
    if args.remote_ms < 0:
        parser.error(f"--remote-ms: must be >= 0, got {args.remote_ms}")
    import ray

    # by its module's name, not __main__'s, so that Ray's workers import the class it pickles
    from benchmarks.checkpoint_storage import DistantFileSystem
    from tests.s3_server import start_s3_server

    work = Path(tempfile.mkdtemp(prefix="checkpoint_storage_"))
    server = start_s3_server(work / "s3")
    os.environ.update(server.env)
    os.environ["TUNER_STORAGE_PATH"] = str(work / "local_runs")
    from benchmarks.loopback import loopback_only

    loopback_only()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    kinds: list[tuple[str, str, Any]] = [("local", str(work / "local"), None), ("s3", server.uri("bench"), None)]
    if args.remote_ms:
        kinds.append((f"{args.remote_ms:g}ms", str(work / "distant"), DistantFileSystem(args.remote_ms / 1e3)))
    try:
        walls: dict[str, list[float]] = {kind: [] for kind, _, _ in kinds}
        best: dict[str, str] = {}
        print(f"2 PPO trials x {args.iterations} iterations of 2,048 env steps, a checkpoint each, 2 kept; "
              f"{args.repeat} round(s), alternating")
        for i in range(args.repeat):
            for kind, storage, filesystem in kinds:
                wall, best[kind] = sweep(storage, f"{kind}_{i}", args.iterations, filesystem)
                walls[kind].append(wall)
                print(f"  round {i + 1} {kind:6} {wall:6.1f} s")
        print(f"\nsweep wall time: local {spread(walls['local'])} s")
        for kind, _, _ in kinds[1:]:
            ratio = [s / loc for s, loc in zip(walls[kind], walls["local"])]
            print(f"  {kind}: {spread(walls[kind])} s; {kind}/local {spread(ratio, '.3f')} (round by round)")
        for kind, _, _ in kinds[:2]:
            took = restore_s(best[kind], args.restores)
            print(f"restore ({kind}): load_agent of {best[kind]} {spread([t * 1e3 for t in took], '.0f')} ms")
    finally:
        ray.shutdown()
        server.stop()


if __name__ == "__main__":
    main()
