"""Packed trials against one process per trial (issue 48): 32 PPO (or DQN, SAC) configs on CartPole-v1
trained for the same env steps each, as one ``tune.run`` sweep of 32 trials twice in the same run:
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

``--algorithm DQN``: lr log-uniform in [1e-4, 3e-3], gamma in {0.98, 0.99, 0.995},
target_network_update_freq in {250, 500, 1000}; DQN's defaults for the rest but a 64x64 network
(1 env, 1,000 env steps an iteration, an update of 128 transitions every 4 env steps after the
first 1,000, double Q, dueling, 3-step returns); the packed learner is
``algorithms/dqn/population.py``, the unpacked one DQN's torch learner. ``--algorithm SAC``: on
Pendulum-v1, lr and gamma as DQN's, tau in {0.005, 0.01, 0.02}; SAC's defaults for the rest but
64x64 networks (an update of 256 transitions every env step after the first 100).

    python benchmarks/packing.py                      # 32 members, 50k env steps each
    python benchmarks/packing.py --members 4 --steps 4096 --systems packed    # the smoke test
    python benchmarks/packing.py --packs 1                  # all 32 in one process
    python benchmarks/packing.py --algorithm DQN --steps 20000
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
SHARED = {
    "PPO": {"env": "CartPole-v1", "num_envs_per_worker": 8, "train_batch_size": 2048, "minibatch_size": 512,
            "num_epochs": 10, "hidden_sizes": [64, 64]},
    "DQN": {"env": "CartPole-v1", "hidden_sizes": [64, 64]},
    "SAC": {"env": "Pendulum-v1", "hidden_sizes": [64, 64]},
}
UPDATES_PER_BATCH = 10 * 4  # PPO: epochs x minibatches of a member's batch


def member_configs(algorithm: str, members: int, seed: int) -> list[dict[str, Any]]:
    """``members`` configs of ``algorithm`` drawn from the benchmark's space."""
    import numpy as np

    rng = np.random.default_rng(seed)
    configs: list[dict[str, Any]] = []
    for i in range(members):
        config = {"lr": float(math.exp(rng.uniform(math.log(1e-4), math.log(3e-3)))),
                  "gamma": float(rng.choice([0.98, 0.99, 0.995])), "seed": i}
        if algorithm == "PPO":
            config.update(entropy_coeff=float(rng.choice([0.0, 0.01])), clip_param=float(rng.choice([0.1, 0.2, 0.3])))
        elif algorithm == "DQN":
            config.update(target_network_update_freq=int(rng.choice([250, 500, 1000])))
        else:
            config.update(tau=float(rng.choice([0.005, 0.01, 0.02])))
        configs.append(config)
    return configs


def search_space(algorithm: str, members: int) -> dict[str, Any]:
    """The space the points are drawn from (the points fix every key of it)."""
    from tuner import tune

    space = {"lr": tune.loguniform(1e-4, 3e-3), "gamma": tune.choice([0.98, 0.99, 0.995]),
             "seed": tune.randint(0, members)}
    if algorithm == "PPO":
        space.update(entropy_coeff=tune.choice([0.0, 0.01]), clip_param=tune.choice([0.1, 0.2, 0.3]))
    elif algorithm == "DQN":
        space.update(target_network_update_freq=tune.choice([250, 500, 1000]))
    else:
        space.update(tau=tune.choice([0.005, 0.01, 0.02]))
    return space


def run_sweep(algorithm: str, configs: list[dict[str, Any]], steps: int, pack_trials: int | bool, learner: str,
              expected: str) -> dict[str, Any]:
    """The members as one ``tune.run`` sweep of ``algorithm`` trials, each stopped at ``steps`` env
    steps: packed ``pack_trials`` to a process, or (False) one trial actor each (PPO: with ``learner``)."""
    from tuner import tune
    from tuner.search import BasicVariantGenerator

    start = time.perf_counter()
    name = f"{algorithm}_{expected}_{start}"
    learners = {"learner": learner} if algorithm == "PPO" else {}
    analysis = tune.run(algorithm, config={**SHARED[algorithm], "num_workers": 0, "num_cpus_for_learner": 1, **learners,
                                           **search_space(algorithm, len(configs))},
                        search_alg=BasicVariantGenerator(points_to_evaluate=configs), num_samples=0,
                        stop={"env_steps_total": steps}, metric="episode_return_mean", mode="max", verbose=0,
                        tensorboard=False, storage_path=str(Path("/tmp") / "packing_benchmark"), name=name,
                        pack_trials=pack_trials)
    wall = time.perf_counter() - start
    by_seed = {t.config["seed"]: t.last_result for t in analysis.trials}
    results = [by_seed[c["seed"]] for c in configs]
    names = {r["learner"] for r in results}
    assert names == {expected if algorithm == "PPO" or expected == "packed" else "torch"}, names
    updates = (sum(r["training_iteration"] for r in results) * UPDATES_PER_BATCH if algorithm == "PPO"
               else sum(r["num_updates"] for r in results))
    return {"wall": wall, "steps": sum(r["env_steps_total"] for r in results), "updates": updates,
            "returns": [r["episode_return_mean"] for r in results]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", default="PPO", help="PPO, DQN or SAC")
    p.add_argument("--members", type=int, default=32)
    p.add_argument("--steps", type=int, default=50_000, help="env steps each member trains for")
    p.add_argument("--systems", default="packed,unpacked")
    p.add_argument("--packs", type=int, default=2, help="packs the members are shared out to (one process each)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    systems = args.systems.split(",")
    if args.algorithm not in SHARED:
        p.error(f"--algorithm: unknown {args.algorithm!r}; allowed: {list(SHARED)}")
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        p.error(f"--systems: unknown {bad}; allowed: {list(SYSTEMS)}")
    positive(p, "--members", args.members)
    positive(p, "--steps", args.steps)
    positive(p, "--packs", args.packs)
    if args.packs > args.members:
        p.error(f"--packs: at most --members ({args.members}), got {args.packs}")
    warnings.filterwarnings("ignore")
    configs = member_configs(args.algorithm, args.members, args.seed)
    print(f"{SHARED[args.algorithm]['env']}, {args.members} {args.algorithm} members x {args.steps:,} env steps each; packed: "
          f"{args.packs} packs")
    ray_init(2)
    runs: dict[str, dict[str, Any]] = {}
    for system in systems:
        pack_trials, learner, expected = SYSTEMS[system]
        share = math.ceil(args.members / args.packs) if pack_trials is None else pack_trials
        run = run_sweep(args.algorithm, configs, args.steps, share, learner, expected)
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
