"""Schedulers on synthetic learning curves with a known best config, FIFO as the baseline.

Each config has a learning curve ``a * (1 - exp(-t / tau))`` plus observation noise, over
``max_t`` iterations; ``a`` (where it ends up) and ``tau`` (how slowly it gets there, drawn from
``[1, tau_max]``) are drawn per config, so fast starters are not always the best finishers. Two
tables by default: ``tau_max=8`` (early rankings mostly hold) and ``tau_max=25`` (slow
starters, the case early stopping gets wrong). The best config is the one with
the highest noiseless final value. Every scheduler runs on the same curves through
``schedulers.simulator`` (pure Python, no Ray), in the same run as FIFO, which trains every
config to ``max_t``. Printed per scheduler, averaged over seeds:

- budget: iterations run, and that as a fraction of FIFO's;
- regret: noiseless final value of the best config minus that of the config the scheduler
  reports as best (best last result, as ExperimentAnalysis does); 0 when it found the best;
- found best: in how many seeds the reported best config is the true best; within 1%: in how
  many its final value is within 1% of the best's (the top finals of 143 configs are often
  closer than that, closer than the noise even: FIFO's own pick misses the exact best).

    python benchmarks/scheduler_budget.py
    python benchmarks/scheduler_budget.py --seeds 50 --configs 81 --slots 4 --noise 0.01 --tau-max 5 15 40
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schedulers import (  # noqa: E402
    ASHAScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    TrialScheduler,
)
from schedulers.simulator import simulate  # noqa: E402

MAX_T = 81


def make_curves(
    seed: int, n: int, noise: float, tau_max: float
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Noisy curves to schedule on, and each config's noiseless final value."""
    rng = random.Random(seed)
    curves, final = {}, {}
    for i in range(n):
        a, tau = rng.uniform(0.5, 1.0), rng.uniform(1.0, tau_max)
        tid = f"c{i:03d}"
        curves[tid] = [a * (1 - math.exp(-t / tau)) + rng.gauss(0.0, noise) for t in range(1, MAX_T + 1)]
        final[tid] = a * (1 - math.exp(-MAX_T / tau))
    return curves, final


SCHEDULERS: dict[str, Callable[[], TrialScheduler]] = {
    "FIFO (baseline)": lambda: FIFOScheduler(),
    "ASHA (Ray rule, grace 1)": lambda: ASHAScheduler(max_t=MAX_T, grace_period=1, reduction_factor=3),
    "ASHA (Ray rule, grace 9)": lambda: ASHAScheduler(max_t=MAX_T, grace_period=9, reduction_factor=3),
    "ASHA (promotion, grace 1)": lambda: ASHAScheduler(
        max_t=MAX_T, grace_period=1, reduction_factor=3, promotion=True
    ),
    "HyperBand (eta=3)": lambda: HyperBandScheduler(max_t=MAX_T, reduction_factor=3),
    "MedianStoppingRule": lambda: MedianStoppingRule(
        time_attr="training_iteration", grace_period=5, min_time_slice=float("inf")
    ),
}


def run_scenario(args: argparse.Namespace, tau_max: float) -> None:
    rows: dict[str, dict[str, list[float]]] = {name: {"budget": [], "regret": [], "found": [], "near": []} for name in SCHEDULERS}
    for seed in range(args.seeds):
        curves, final = make_curves(seed, args.configs, args.noise, tau_max)
        best = max(final, key=final.get)
        for name, make in SCHEDULERS.items():
            res = simulate(make(), curves, n_slots=args.slots, metric="accuracy", mode="max", add_trials=args.add)
            rows[name]["budget"].append(res.budget_used)
            rows[name]["regret"].append(final[best] - final[res.best_trial_found])
            rows[name]["found"].append(res.best_trial_found == best)
            rows[name]["near"].append(final[best] - final[res.best_trial_found] <= 0.01 * final[best])

    fifo_budget = statistics.mean(rows["FIFO (baseline)"]["budget"])
    print(f"tau up to {tau_max:g} ({'slow starters: early rankings mislead' if tau_max > 10 else 'early rankings mostly hold'})")
    header = f"{'scheduler':<26} {'budget':>8} {'of FIFO':>8} {'regret':>8} {'found best':>10} {'within 1%':>10}"
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        budget = statistics.mean(row["budget"])
        print(
            f"{name:<26} {budget:>8.0f} {budget / fifo_budget:>8.1%} {statistics.mean(row['regret']):>8.4f} "
            f"{sum(row['found']):>6d}/{args.seeds:<3d} {sum(row['near']):>6d}/{args.seeds:<3d}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--configs", type=int, default=143, help="143: one full HyperBand band for max_t=81, eta=3")
    parser.add_argument("--slots", type=int, default=8, help="trials running at once")
    parser.add_argument("--noise", type=float, default=0.002, help="sd of the observation noise")
    parser.add_argument("--tau-max", type=float, nargs="+", default=[8.0, 25.0],
                        help="one table per value: curve time constants are drawn from [1, tau_max]")
    parser.add_argument("--add", choices=["lazy", "upfront"], default="lazy",
                        help="trials created on demand (tuner's controller) or all at the start (Ray Tune)")
    args = parser.parse_args()

    start = time.perf_counter()
    print(
        f"{args.configs} configs x {MAX_T} iterations, {args.slots} slots, noise sd {args.noise:g}, "
        f"trials added {args.add}; mean over {args.seeds} seeds\n"
    )
    for tau_max in args.tau_max:
        run_scenario(args, tau_max)
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
