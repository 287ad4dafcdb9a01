"""Ape-X's scaling with rollout actors: env steps/s of one APEX trainer against its number of
actors (1, 2, 4, 8) on the sleeping simulator, next to RLlib's DQN with as many env runners (RLlib
2.x has no Ape-X: its DQN with env runners is what an RLlib user runs instead), in the same run.

The simulator is ``tuner/SlowCartPole-v1`` (a step sleeps 3 ms, or 100 ms with probability 3 %):
N actors of one env each could reach N / (mean step) env steps/s, the ideal printed beside each
point, whatever the machine's cores (they sleep). Both trainers learn while they sample, with the
same work per point: a 64x64 Q network, 3-step double dueling targets, a replay buffer of 50,000,
one update of 128 transitions per 4 env steps sampled (RLlib: ``training_intensity`` 32, replayed
per sampled), prioritized replay (alpha 0.6, beta 0.4), learning after 1,000 env steps; ours'
actors stream on Ape-X's ladder of epsilons (one epsilon, 0.4, with one actor), RLlib's sample
fragments of 4 steps with an epsilon schedule. A point: an untimed warm-up until the learner
updates and every actor is up, then whole ``train()`` iterations for ``--seconds``; the rate is
env steps sampled over that time.

    python benchmarks/apex_scaling.py                           # ours and RLlib, 1, 2, 4, 8 actors
    python benchmarks/apex_scaling.py --systems ours --actors 1,2 --seconds 3   # the smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import int_list, positive, ray_init  # noqa: E402 - after the path is set

ENV_CONFIG = {"fast_ms": 3.0, "slow_ms": 100.0, "slow_prob": 0.03}
LEARNING_STARTS = 1000


def ours(actors: int, seed: int) -> tuple[Callable[[], tuple[int, int]], Callable[[], None]]:
    from algorithms import APEX

    trainer = APEX(config={
        "env": "tuner/SlowCartPole-v1", "env_config": ENV_CONFIG, "seed": seed, "num_workers": actors,
        "num_envs_per_worker": 1, "num_cpus_per_worker": 0.5, "num_cpus_for_learner": 1,
        "per_worker_exploration": actors >= 2, "hidden_sizes": [64, 64], "train_batch_size": 128,
        "train_freq": 4, "gradient_steps": 1, "learning_starts": LEARNING_STARTS,
        "min_sample_timesteps_per_iteration": 250})

    def step() -> tuple[int, int]:
        result = trainer.train()
        return int(result["env_steps_total"]), int(result.get("num_updates", 0))

    return step, trainer.stop


def rllib(actors: int, seed: int) -> tuple[Callable[[], tuple[int, int]], Callable[[], None]]:
    from ray import tune
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from algorithms.envs.builtin import SlowCartPole

    tune.register_env("slow_cartpole", lambda config: SlowCartPole(**config))
    config = (
        DQNConfig()
        .environment("slow_cartpole", env_config=ENV_CONFIG)
        .env_runners(num_env_runners=actors, num_envs_per_env_runner=1, rollout_fragment_length=4,
                     num_cpus_per_env_runner=0.5)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=128, n_step=3, double_q=True, dueling=True, training_intensity=32,
                  num_steps_sampled_before_learning_starts=LEARNING_STARTS,
                  replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50_000,
                                        "alpha": 0.6, "beta": 0.4})
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="relu"))
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=250)
        .debugging(seed=seed)
    )
    algorithm = config.build_algo()

    def step() -> tuple[int, int]:
        result = algorithm.train()
        learners = result.get("learners", {}).get("__all_modules__", {})
        return (int(result["env_runners"]["num_env_steps_sampled_lifetime"]),
                int(learners.get("num_module_steps_trained_lifetime", 0)))

    return step, algorithm.stop


SYSTEMS = {"ours": ours, "rllib": rllib}


def measure(system: str, actors: int, seconds: float, seed: int) -> dict[str, float]:
    step, stop = SYSTEMS[system](actors, seed)
    try:
        steps, trained = step()
        while steps < LEARNING_STARTS + 500:  # the learner updates, every actor sampled
            steps, trained = step()
        start, steps0, trained0 = time.perf_counter(), steps, trained
        while time.perf_counter() - start < seconds:
            steps, trained = step()
        elapsed = time.perf_counter() - start
        return {"rate": (steps - steps0) / elapsed, "trained": (trained - trained0) / elapsed}
    finally:
        stop()


def main(argv: list[str] | None = None) -> None:
    from algorithms.envs.builtin import measure_mean_step

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--actors", default="1,2,4,8")
    p.add_argument("--systems", default="ours,rllib")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    systems = args.systems.split(",")
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        p.error(f"--systems: unknown {bad}; allowed: {sorted(SYSTEMS)}")
    actors = int_list(p, "--actors", args.actors, minimum=1)
    positive(p, "--seconds", args.seconds)
    warnings.filterwarnings("ignore")
    ray_init(16)  # declared CPUs: the actors sleep, the machine's cores are no limit to their number
    print(f"tuner/SlowCartPole-v1 {ENV_CONFIG}; env steps/s over {args.seconds:g} s per point")
    print(f"{'actors':>6} {'ideal':>7} " + " ".join(f"{s + ' steps/s':>14} {'of ideal':>8}" for s in systems)
          + "   ours / RLlib" * ("ours" in systems and "rllib" in systems))
    for n in actors:
        ideal = n / measure_mean_step(ENV_CONFIG)
        rates = {s: measure(s, n, args.seconds, args.seed)["rate"] for s in systems}
        row = f"{n:>6} {ideal:>7.0f} " + " ".join(f"{rates[s]:>14.0f} {rates[s] / ideal:>8.0%}" for s in systems)
        if "ours" in rates and "rllib" in rates:
            row += f"   {rates['ours'] / rates['rllib']:.2f}x" if rates["rllib"] > 0 else "   -"
        print(row, flush=True)


if __name__ == "__main__":
    main()
