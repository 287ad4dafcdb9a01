"""Packed trials against one process per trial (issue 48): 32 PPO configs on CartPole-v1 trained
for the same env steps each, as one ``tune.run`` sweep of 32 PPO trials twice in the same run:
packed (``pack_trials``: ``--packs`` 2 pack actors of 1 CPU each, holding an even share of the
members as one population learner, ``algorithms/ppo/population.py``: their layers stacked, their
envs one vector env) and unpacked (``pack_trials=False``: one trial actor each, 2 at a time on the
2 CPUs given to Ray, sampling in the learner's process with the numpy learner: the fastest
layout for CartPole).

The configs: lr log-uniform in [1e-4, 3e-3], entropy_coeff in {0, 0.01}, clip_param in {0.1, 0.2,
0.3}, gamma in {0.98, 0.99, 0.995}, drawn from ``--seed``; the member's seed its index; PPO's
defaults for the rest (8 envs, batches of 2,048, minibatches of 512, 10 epochs, separate 64x64
tanh networks, Adam with eps 1e-5, gradient norm 0.5, GAE lambda 0.95). Printed: wall time, env
steps and updates per second of each system, and each member's final 100-episode mean return in
both (their paired difference: packing must not change what a member learns).

    python benchmarks/packing.py                      # 32 members, 50k env steps each
    python benchmarks/packing.py --members 4 --steps 4096 --systems packed    # the smoke test
    python benchmarks/packing.py --packs 1                  # all 32 in one process
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import positive, ray_init  # noqa: E402 - after the path is set

#: system -> (pack_trials: None for --packs' share, PPO's learner, the learner its results must name)
SYSTEMS = {"packed": (None, "auto", "packed"), "unpacked": (False, "auto", "numpy"),
           "unpacked-torch": (False, "torch", "torch")}
SHARED = {"env": "CartPole-v1", "num_envs_per_worker": 8, "train_batch_size": 2048, "minibatch_size": 512,
          "num_epochs": 10, "hidden_sizes": [64, 64]}
UPDATES_PER_BATCH = 10 * 4  # epochs x minibatches of a member's batch


def member_configs(members: int, seed: int) -> list[dict[str, Any]]:
    """``members`` PPO configs drawn from the benchmark's space."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [{"lr": float(math.exp(rng.uniform(math.log(1e-4), math.log(3e-3)))),
             "entropy_coeff": float(rng.choice([0.0, 0.01])), "clip_param": float(rng.choice([0.1, 0.2, 0.3])),
             "gamma": float(rng.choice([0.98, 0.99, 0.995])), "seed": i} for i in range(members)]


def run_sweep(configs: list[dict[str, Any]], steps: int, pack_trials: int | bool, learner: str,
              expected: str) -> dict[str, Any]:
    """The members as one ``tune.run`` sweep of PPO trials, each stopped at ``steps`` env steps:
    packed ``pack_trials`` to a process, or (False) one trial actor each with ``learner``."""
    from tuner import tune
    from tuner.search import BasicVariantGenerator

    start = time.perf_counter()
    space = {"lr": tune.loguniform(1e-4, 3e-3), "entropy_coeff": tune.choice([0.0, 0.01]),
             "clip_param": tune.choice([0.1, 0.2, 0.3]), "gamma": tune.choice([0.98, 0.99, 0.995]),
             "seed": tune.randint(0, len(configs))}  # the points fix every one of them
    name = f"{expected}_{start}"
    analysis = tune.run("PPO", config={**SHARED, "num_workers": 0, "num_cpus_for_learner": 1, "learner": learner,
                                       **space},
                        search_alg=BasicVariantGenerator(points_to_evaluate=configs), num_samples=0,
                        stop={"env_steps_total": steps}, metric="episode_return_mean", mode="max", verbose=0,
                        tensorboard=False, storage_path=str(Path("/tmp") / "packing_benchmark"), name=name,
                        pack_trials=pack_trials)
    wall = time.perf_counter() - start
    by_seed = {t.config["seed"]: t.last_result for t in analysis.trials}
    results = [by_seed[c["seed"]] for c in configs]
    learners = {r["learner"] for r in results}
    assert learners == {expected}, learners
    return {"wall": wall, "steps": sum(r["env_steps_total"] for r in results),
            "updates": sum(r["training_iteration"] for r in results) * UPDATES_PER_BATCH,
            "returns": [r["episode_return_mean"] for r in results]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=32)
    p.add_argument("--steps", type=int, default=50_000, help="env steps each member trains for")
    p.add_argument("--systems", default="packed,unpacked")
    p.add_argument("--packs", type=int, default=2, help="packs the members are shared out to (one process each)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    systems = args.systems.split(",")
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        p.error(f"--systems: unknown {bad}; allowed: {list(SYSTEMS)}")
    positive(p, "--members", args.members)
    positive(p, "--steps", args.steps)
    positive(p, "--packs", args.packs)
    if args.packs > args.members:
        p.error(f"--packs: at most --members ({args.members}), got {args.packs}")
    warnings.filterwarnings("ignore")
    configs = member_configs(args.members, args.seed)
    print(f"CartPole-v1, {args.members} PPO members x {args.steps:,} env steps each; packed: {args.packs} packs")
    ray_init(2)
    runs: dict[str, dict[str, Any]] = {}
    for system in systems:
        pack_trials, learner, expected = SYSTEMS[system]
        share = math.ceil(args.members / args.packs) if pack_trials is None else pack_trials
        run = run_sweep(configs, args.steps, share, learner, expected)
        runs[system] = run
        returns = [r for r in run["returns"] if not math.isnan(r)]
        print(f"  {system:14s} wall {run['wall']:6.1f} s  {run['steps'] / run['wall']:9,.0f} env steps/s  "
              f"{run['updates'] / run['wall']:7,.0f} updates/s  mean final return "
              f"{statistics.fmean(returns) if returns else math.nan:6.1f}", flush=True)
    packed = runs.get("packed")
    for name, other in runs.items():
        if packed is None or other is packed:
            continue
        diffs = [a - b for a, b in zip(packed["returns"], other["returns"])]
        print(f"  {name} / packed: {other['wall'] / packed['wall']:.2f}x wall time; final return, packed minus "
              f"{name}, per member: mean {statistics.fmean(diffs):+.1f}, sd {statistics.pstdev(diffs):.1f}")


if __name__ == "__main__":
    main()
