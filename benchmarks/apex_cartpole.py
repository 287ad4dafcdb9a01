"""Ape-X DQN on CartPole-v1: env steps, env steps per second and wall time until its greedy policy's
evaluation return reaches a target, ours (APEX, 4 streaming actors on the epsilon ladder) next to
RLlib's DQN with 4 env runners (RLlib 2.x has no Ape-X: its DQN with env runners is what an RLlib
user runs instead), in the same run (issue 47: wall time to the return against the peer).

The same work in both: 4 rollout actors (RLlib: env runners) of one env each; a 64x64 ReLU Q
network with dueling heads, double Q, 3-step targets; Adam lr 5e-4, gamma 0.99, gradient norm
clipped at 40; a prioritized replay of 50,000 (alpha 0.6, beta 0.4) learning after 1,000 env steps,
one update of 32 transitions per 4 env steps sampled (RLlib: ``training_intensity`` 8, replayed per
sampled); the target network copied every 500 env steps (RLlib: its own count); a result every
2,500 env steps, each followed by 10 greedy evaluation episodes in the learner's process (RLlib: its
local env runner), which the rule reads: the evaluation's mean return >= the target. What differs is
each system's own: ours' actors stream on Ape-X's ladder of epsilons (0.4 ** (1 + 7 i / 3)) and give
their transitions' first priorities, RLlib's sample fragments of 4 steps with one epsilon schedule
(1.0 to 0.05 over 10,000 env steps). Seeds interleaved (ours, RLlib, ours, ...) after an untimed
warm-up of each; wall time from before the trainer (RLlib: ``build_algo``) is built, Ray already up.

    python benchmarks/apex_cartpole.py                    # ours and RLlib, 3 seeds
    python benchmarks/apex_cartpole.py --systems ours --quick    # the smoke test
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import ray_init  # noqa: E402 - after the path is set
from benchmarks.peers.to_target import parse_race, print_table, race_parser, race_seeds, race_to_target  # noqa: E402

ACTORS, ITERATION_STEPS, EVAL_EPISODES, LEARNING_STARTS = 4, 2500, 10, 1000
SHARED: dict[str, Any] = {"lr": 5e-4, "gamma": 0.99, "n_step": 3, "double_q": True, "dueling": True,
                          "target_network_update_freq": 500}


def run_ours(seed: int, target: float, max_steps: int) -> dict[str, Any]:
    from algorithms import APEX

    start = time.perf_counter()
    trainer = APEX(config={
        "env": "CartPole-v1", "seed": seed, "num_workers": ACTORS, "num_envs_per_worker": 1,
        "num_cpus_per_worker": 0.5, "num_cpus_for_learner": 1, "hidden_sizes": [64, 64], "activation": "relu",
        "train_batch_size": 32, "train_freq": 4, "gradient_steps": 1, "max_grad_norm": 40.0,
        "learning_starts": LEARNING_STARTS, "replay_buffer_config": {"capacity": 50_000},
        "prioritized_replay_alpha": 0.6, "prioritized_replay_beta": 0.4,
        "min_sample_timesteps_per_iteration": ITERATION_STEPS, "evaluation_interval": 1,
        "evaluation_duration": EVAL_EPISODES, **SHARED})
    try:
        return race_to_target(trainer.train, lambda r: (r["env_steps_total"], r["evaluation"]["episode_return_mean"]),
                              start, target, max_steps)
    finally:
        trainer.stop()


def run_rllib(seed: int, target: float, max_steps: int) -> dict[str, Any]:
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    start = time.perf_counter()
    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=ACTORS, num_envs_per_env_runner=1, rollout_fragment_length=4,
                     num_cpus_per_env_runner=0.5)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=32, training_intensity=8, grad_clip=40.0, grad_clip_by="global_norm",
                  num_steps_sampled_before_learning_starts=LEARNING_STARTS,
                  replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50_000,
                                        "alpha": 0.6, "beta": 0.4}, **SHARED)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="relu"))
        .evaluation(evaluation_interval=1, evaluation_duration=EVAL_EPISODES, evaluation_duration_unit="episodes",
                    evaluation_num_env_runners=0, evaluation_config={"explore": False})
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=ITERATION_STEPS)
        .debugging(seed=seed)
    )
    algorithm = config.build_algo()
    try:
        def read(result: dict[str, Any]) -> tuple[int, float]:
            evaluation = result.get("evaluation", {}).get("env_runners", {})
            return (int(result["env_runners"]["num_env_steps_sampled_lifetime"]),
                    float(evaluation.get("episode_return_mean", math.nan)))

        return race_to_target(algorithm.train, read, start, target, max_steps)
    finally:
        algorithm.stop()


SYSTEMS = {"ours": run_ours, "rllib": run_rllib}


def main(argv: list[str] | None = None) -> None:
    p = race_parser(__doc__.splitlines()[0], list(SYSTEMS), target=200.0, max_steps=150_000)
    args, systems, seeds = parse_race(p, argv, list(SYSTEMS))
    max_steps = ITERATION_STEPS if args.quick else args.max_steps
    warnings.filterwarnings("ignore")
    ray_init(2 * ACTORS + 2)  # room for both systems' actors: CPUs are no limit, cores are the machine's
    print(f"CartPole-v1, rule: {EVAL_EPISODES} greedy evaluation episodes' mean >= {args.target:g} within "
          f"{max_steps:,} env steps; {ACTORS} actors x 1 env; seeds {seeds}")
    runs = race_seeds("APEX", {s: SYSTEMS[s] for s in systems}, seeds, args.target, max_steps,
                      None if args.quick else ITERATION_STEPS)
    print_table("Ape-X DQN (RLlib: DQN with env runners)", runs)


if __name__ == "__main__":
    main()
