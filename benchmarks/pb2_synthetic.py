"""PB2 against Ray Tune's own PB2, PBT and no exploration, on curves whose best hyperparameters are known.

The bandit problem of ``tests/schedulers/scheduler_curves.py``: two hyperparameters (``lr`` in
[0, 1], ``clip`` in [0.1, 0.5]); each step a model's score grows by
``1 - 2 (lr - 0.7)^2 - 10 (clip - 0.2)^2`` plus Gaussian noise, and the model carries its score
(an exploit goes on from the donor's). Every initial config is far from the optimum
(``lr <= 0.4``, ``clip >= 0.3``), so it has to be found. Every system runs through
``schedulers.simulator`` on the same curves, initial configs and seeds, a population of
``--population`` trials running at once, perturbing every ``--interval`` iterations:

- FIFO: no exploit, no explore;
- exploit only: our PBT with an identity explore step (copies the top trial, nothing new);
- PBT: our PBT, ``lr`` and ``clip`` as ``tune.uniform`` domains (perturbed by 0.8 / 1.2, resampled
  with probability 0.25);
- PB2 (ours), and Ray Tune's ``ray.tune.schedulers.pb2.PB2`` driven through the same simulator
  (``tests/schedulers/raytune_pbt_driver.py``; its random draws come from the global random
  states, seeded per seed).

Printed per system, over seeds: the median (min-max) of the population's best final score and of
its mean final score, the median distance to the optimum of the configs chosen in the second
half of the exploits (hyperparameters scaled to their bounds), and seconds per run. Ray Tune's
PB2 takes a second or more per exploit on 2 cores (input validation in its kernel's calls).

    python benchmarks/pb2_synthetic.py                   # 10 seeds, a few minutes
    python benchmarks/pb2_synthetic.py --seeds 5 --no-ray
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from schedulers import PB2, FIFOScheduler, PopulationBasedTraining, TrialScheduler  # noqa: E402
from schedulers.simulator import simulate  # noqa: E402
from tests.schedulers.scheduler_curves import (  # noqa: E402
    BANDIT_BOUNDS,
    distance_to_optimum,
    initial_configs,
    noisy_curves,
)


def systems(args: argparse.Namespace) -> dict[str, Callable[[int], TrialScheduler]]:
    from tuner import tune

    common = dict(time_attr="training_iteration", perturbation_interval=args.interval)
    out: dict[str, Callable[[int], TrialScheduler]] = {
        "FIFO": lambda seed: FIFOScheduler(),
        "exploit only": lambda seed: PopulationBasedTraining(**common, custom_explore_fn=lambda c: c, seed=seed),
        "PBT": lambda seed: PopulationBasedTraining(
            **common, hyperparam_mutations={k: tune.uniform(*b) for k, b in BANDIT_BOUNDS.items()}, seed=seed
        ),
        "PB2 (ours)": lambda seed: PB2(**common, hyperparam_bounds=BANDIT_BOUNDS, seed=seed),
    }
    if not args.no_ray:
        from ray.tune.schedulers.pb2 import PB2 as RayPB2

        from tests.schedulers.raytune_pbt_driver import RayTuneDriven

        def ray_pb2(seed: int) -> TrialScheduler:
            random.seed(seed)
            np.random.seed(seed)
            return RayTuneDriven(RayPB2(**common, hyperparam_bounds=BANDIT_BOUNDS, log_config=False))

        out["PB2 (Ray Tune)"] = ray_pb2
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--length", type=int, default=48, help="iterations per trial")
    parser.add_argument("--interval", type=int, default=4, help="perturbation interval, in iterations")
    parser.add_argument("--noise", type=float, default=0.1, help="sd of each step's noise")
    parser.add_argument("--no-ray", action="store_true", help="leave Ray Tune's PB2 out")
    args = parser.parse_args()
    for name in ("seeds", "population", "length", "interval"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: must be >= 1, got {getattr(args, name)}")
    logging.disable(logging.INFO)  # Ray Tune's PBT logs every exploit
    warnings.simplefilter("ignore")  # and its GP fits warn at their bounds

    print(f"population {args.population}, {args.length} iterations, perturbation every {args.interval}, "
          f"noise sd {args.noise:g}; {args.seeds} seeds (curves, initial configs and seeds shared)\n")
    header = f"{'system':<16} {'best final (min-max)':>24} {'mean final (min-max)':>24} {'late dist':>10} {'s/run':>7}"
    print(header)
    print("-" * len(header))
    medians = {}
    for name, make in systems(args).items():
        best, mean, late, seconds = [], [], [], []
        for seed in range(args.seeds):
            start = time.perf_counter()
            scheduler = make(seed)
            result = simulate(scheduler, noisy_curves(seed, args.noise), initial_configs(seed, args.population),
                              n_slots=args.population, metric="score", mode="max", max_iterations=args.length,
                              carry=True)
            seconds.append(time.perf_counter() - start)
            finals = [t.last_result["score"] for t in result.trials.values()]
            best.append(max(finals))
            mean.append(statistics.mean(finals))
            configs = [e.detail[1] for e in result.exploits]  # the configs the exploits chose
            late += [distance_to_optimum(c) for c in configs[len(configs) // 2:]]
        medians[name] = statistics.median(best)
        spread = lambda v: f"{statistics.median(v):7.1f} ({min(v):5.1f}-{max(v):5.1f})"  # noqa: E731
        dist = f"{statistics.median(late):10.2f}" if late else f"{'-':>10}"
        print(f"{name:<16} {spread(best):>24} {spread(mean):>24} {dist} {statistics.mean(seconds):7.2f}")
    start_dist = statistics.median(min(distance_to_optimum(c) for c in initial_configs(s, args.population))
                                   for s in range(args.seeds))
    print(f"\nbest initial config's distance to the optimum (median over seeds): {start_dist:.2f}")
    print(f"PB2 (ours) / PBT, median best final: {medians['PB2 (ours)'] / medians['PBT']:.2f}")
    if "PB2 (Ray Tune)" in medians:
        print(f"PB2 (ours) / PB2 (Ray Tune), median best final: {medians['PB2 (ours)'] / medians['PB2 (Ray Tune)']:.2f}")


if __name__ == "__main__":
    main()
