"""IMPALA and APPO on CartPole-v1: env steps, env steps per second and wall time until the
100-episode mean return reaches a target, ours next to RLlib's (its default, new API stack) in the
same run (issue 47: each new trainer as fast as the peer a user would pick).

The same work in both, RLlib's defaults made explicit and given to ours under the same keys:
2 rollout actors (RLlib: env runners) of 8 envs each, sampling without waiting for the learner;
a learner in the driver's process (RLlib: ``num_learners=0``) making one gradient step per
``train_batch_size`` 500 env steps, Adam lr 5e-4, ``vf_loss_coeff`` 0.5, ``entropy_coeff`` 0.01,
``grad_clip`` 40 (global norm), V-trace with both clips at 1, gamma 0.99; APPO also ``clip_param``
0.4, ``target_network_update_freq`` 2; separate 64x64 tanh policy and value networks; a result
every 5,000 env steps (RLlib: ``min_time_s_per_iteration=0``, ``min_sample_timesteps_per_iteration``
5000; IMPALA's default is a result every 10 s), each checked against the rule. What differs is each
system's own: RLlib's rollout fragments of 50 steps, its learner connector pipeline and circular
buffer (APPO: 8 batches, each learnt on twice), ours' streams (``WorkerGroup.stream``) and one pass
per batch. Seeds interleaved (ours, RLlib, ours, ...) after an untimed warm-up of each; wall time
from before the trainer (RLlib: ``build_algo``) is built, Ray already up.

    python benchmarks/impala_cartpole.py                        # IMPALA and APPO, 3 seeds
    python benchmarks/impala_cartpole.py --algos appo --seeds 0
    python benchmarks/impala_cartpole.py --systems ours --quick    # the smoke test
"""

from __future__ import annotations

import functools
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import ray_init  # noqa: E402 - after the path is set
from benchmarks.peers.to_target import parse_race, print_table, race_parser, race_seeds, race_to_target  # noqa: E402

SHARED: dict[str, Any] = {"train_batch_size": 500, "lr": 5e-4, "gamma": 0.99, "vf_loss_coeff": 0.5,
                          "entropy_coeff": 0.01, "grad_clip": 40.0, "vtrace_clip_rho_threshold": 1.0,
                          "vtrace_clip_pg_rho_threshold": 1.0}
APPO_ONLY: dict[str, Any] = {"clip_param": 0.4, "target_network_update_freq": 2}
WORKERS, ENVS, ITERATION_STEPS, WINDOW = 2, 8, 5000, 100


def _hp(algo: str) -> dict[str, Any]:
    return {**SHARED, **(APPO_ONLY if algo == "APPO" else {})}


def run_ours(algo: str, seed: int, target: float, max_steps: int) -> dict[str, Any]:
    from algorithms.core.names import trainer_class

    start = time.perf_counter()
    trainer = trainer_class(algo)(config={
        "env": "CartPole-v1", "seed": seed, "num_workers": WORKERS, "num_envs_per_worker": ENVS,
        "num_cpus_per_worker": 1, "num_cpus_for_learner": 1, "hidden_sizes": [64, 64], "activation": "tanh",
        "min_sample_timesteps_per_iteration": ITERATION_STEPS, "metrics_num_episodes_for_smoothing": WINDOW,
        **_hp(algo)})
    try:
        return race_to_target(trainer.train, lambda r: (r["env_steps_total"], r["episode_return_mean"]), start, target,
                     max_steps)
    finally:
        trainer.stop()


def run_rllib(algo: str, seed: int, target: float, max_steps: int) -> dict[str, Any]:
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.impala import IMPALAConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    hp = _hp(algo)
    batch = hp.pop("train_batch_size")
    start = time.perf_counter()
    config = (
        (APPOConfig() if algo == "APPO" else IMPALAConfig())
        .environment("CartPole-v1")
        .env_runners(num_env_runners=WORKERS, num_envs_per_env_runner=ENVS, num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=batch, grad_clip_by="global_norm", **hp)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh",
                                                   vf_share_layers=False))
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=ITERATION_STEPS,
                   metrics_num_episodes_for_smoothing=WINDOW)
        .debugging(seed=seed)
    )
    algorithm = config.build_algo()
    try:
        def read(result: dict[str, Any]) -> tuple[int, float]:
            runners = result["env_runners"]
            return int(runners["num_env_steps_sampled_lifetime"]), float(runners.get("episode_return_mean", math.nan))

        return race_to_target(algorithm.train, read, start, target, max_steps)
    finally:
        algorithm.stop()


SYSTEMS = {"ours": run_ours, "rllib": run_rllib}


def main(argv: list[str] | None = None) -> None:
    p = race_parser(__doc__.splitlines()[0], list(SYSTEMS), target=150.0, max_steps=400_000)
    p.add_argument("--algos", default="impala,appo")
    args, systems, seeds = parse_race(p, argv, list(SYSTEMS))
    algos = [a.upper() for a in args.algos.split(",")]
    bad = [a for a in algos if a not in ("IMPALA", "APPO")]
    if bad:
        p.error(f"--algos: unknown {bad}; allowed: impala, appo")
    max_steps = 10_000 if args.quick else args.max_steps
    warnings.filterwarnings("ignore")
    ray_init(2 * WORKERS + 2)  # room for both systems' actors: CPUs are no limit, cores are the machine's
    print(f"CartPole-v1, rule: {WINDOW}-episode mean >= {args.target:g} within {max_steps:,} env steps; "
          f"{WORKERS} actors x {ENVS} envs; seeds {seeds}")
    for algo in algos:
        runs_of = {s: functools.partial(SYSTEMS[s], algo) for s in systems}
        runs = race_seeds(algo, runs_of, seeds, args.target, max_steps, None if args.quick else 2 * ITERATION_STEPS)
        print_table(algo, runs)


if __name__ == "__main__":
    main()
