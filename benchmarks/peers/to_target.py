"""A trainer's race to a target return, and the table of several systems' races (the trainer
benchmarks against RLlib: ``impala_cartpole.py``, ``apex_cartpole.py``)."""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from benchmarks.peers.common import int_list, positive


def race_to_target(train: Callable[[], dict[str, Any]], read: Callable[[dict[str, Any]], tuple[int, float]],
                   start: float, target: float, max_steps: int) -> dict[str, Any]:
    """Call ``train`` until ``read`` (env steps, score) of its result scores ``target`` or the steps
    reach ``max_steps``: the steps and wall time (from ``start``) it held at, and the env steps/s
    from the first result on (the actors up and sampling)."""
    steps, first = 0, None
    while steps < max_steps:
        result = train()
        steps, score = read(result)
        if first is None:
            first = (steps, time.perf_counter())
        if score >= target:
            wall = time.perf_counter() - start
            rate = (steps - first[0]) / max(time.perf_counter() - first[1], 1e-9)
            return {"steps": steps, "wall": wall, "rate": rate}
    rate = (steps - first[0]) / max(time.perf_counter() - first[1], 1e-9) if first else math.nan
    return {"steps": None, "wall": None, "rate": rate, "cap": steps}


def describe(run: dict[str, Any]) -> str:
    """One run's line: its steps and wall time to the target, or the cap it stopped at."""
    solved = f"{run['steps']:,} steps, {run['wall']:.1f} s" if run["steps"] else f"not solved in {run['cap']:,}"
    return f"{solved}, {run['rate']:,.0f} env steps/s"


def print_table(algo: str, runs: dict[str, list[dict[str, Any]]], peer: str = "rllib") -> None:
    """Medians over seeds per system (solved runs' steps and wall time), and the peer / ours ratios."""
    print(f"\n{algo}: median over seeds (solved runs' steps and wall time)")
    medians = {}
    for system, rs in runs.items():
        solved = [r for r in rs if r["steps"]]
        wall = statistics.median(r["wall"] for r in solved) if solved else math.nan
        steps = statistics.median(r["steps"] for r in solved) if solved else math.nan
        rate = statistics.median(r["rate"] for r in rs)
        medians[system] = (wall, rate)
        print(f"  {system:5s} solved {len(solved)}/{len(rs)}  steps {steps:,.0f}  wall {wall:.1f} s  "
              f"{rate:,.0f} env steps/s")
    if "ours" in medians and peer in medians:
        (ow, orate), (pw, prate) = medians["ours"], medians[peer]
        print(f"  {peer} / ours: {pw / ow:.2f}x wall time to the target, ours / {peer} {orate / prate:.2f}x env steps/s")


def race_seeds(label: str, runs_of: Mapping[str, Callable[[int, float, int], dict[str, Any]]], seeds: Sequence[int],
               target: float, max_steps: int, warm_up_steps: int | None, width: int = 5) -> dict[str, list[dict[str, Any]]]:
    """Each system's untimed warm-up (``warm_up_steps``, seed 1000, no target; None: none), then
    the seeds interleaved (system after system, seed after seed): ``runs_of[system](seed, target,
    max_steps)`` each, a line per run, and the runs by system."""
    if warm_up_steps is not None:  # untimed: imports, the first actors' start
        for run_of in runs_of.values():
            run_of(1000, math.inf, warm_up_steps)
    runs: dict[str, list[dict[str, Any]]] = {system: [] for system in runs_of}
    for seed in seeds:
        for system, run_of in runs_of.items():
            run = run_of(seed, target, max_steps)
            runs[system].append(run)
            print(f"  {label} {system:{width}s} seed {seed}: {describe(run)}", flush=True)
    return runs


def race_parser(description: str, systems: Sequence[str], target: float, max_steps: int) -> argparse.ArgumentParser:
    """The flags every race shares: ``--systems``, ``--seeds``, ``--target``, ``--max-steps``, ``--quick``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--systems", default=",".join(systems))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--target", type=float, default=target)
    p.add_argument("--max-steps", type=int, default=max_steps)
    p.add_argument("--quick", action="store_true", help="a tiny budget, no warm-up (the smoke test)")
    return p


def parse_race(p: argparse.ArgumentParser, argv: list[str] | None, systems: Sequence[str]
               ) -> tuple[argparse.Namespace, list[str], list[int]]:
    """The parsed flags, the systems asked for and the seeds; a bad shared flag is argparse's one-line
    error naming it."""
    args = p.parse_args(argv)
    chosen = args.systems.split(",")
    bad = [s for s in chosen if s not in systems]
    if bad:
        p.error(f"--systems: unknown {bad}; allowed: {sorted(systems)}")
    seeds = int_list(p, "--seeds", args.seeds)
    positive(p, "--max-steps", args.max_steps)
    return args, chosen, seeds
