"""Asynchronous sampling vs lock-step vector sampling with an environment that is sometimes slow.

The environment's step takes ``--fast-ms`` (3 ms) usually and ``--slow-ms`` (100 ms) with
probability ``--slow-prob`` (3 %): a simulator or a remote service with hiccups. With ``--envs``
(8) copies, the ideal throughput is envs / mean step time (the env's fast and slow steps timed
apart, since time.sleep overshoots). Measured, in env steps per second:

* lock-step vector env: gymnasium's ``AsyncVectorEnv`` (one process per env, stepped in
  parallel), random actions; every step waits for the slowest env;
* ours, synchronous sampling: PPO with one rollout actor per env; an iteration waits for every
  actor's fragment (lock-step per fragment rather than per step);
* ours, asynchronous sampling (``sample_async=True``): each actor steps its env without pause and
  loads new weights between two steps; the learner takes what they sampled when a batch is full;
* ours, asynchronous with sample requests (``max_requests_in_flight_per_worker=1``): the learner
  takes the first fragments to arrive; each actor is asked for its next fragment as soon as its
  last one is taken; and with 2, a second request waits in each actor's queue, so an actor that
  finishes while the learner learns goes straight on.

Ours are whole PPO iterations (sampling and learning, small SGD settings), timed from the end of
the first iteration to the end of the last. Episodes never end within the run, so every
counted step is one ``step()`` call of an env.

    python benchmarks/lockstep.py                   # 8 envs, about a minute
    python benchmarks/lockstep.py --envs 16 --seconds 20
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class SlowStepEnv(gym.Env):
    """A step sleeps ``fast_ms`` usually and ``slow_ms`` with probability ``slow_prob``."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.fast_s = config.get("fast_ms", 3.0) / 1000
        self.slow_s = config.get("slow_ms", 100.0) / 1000
        self.slow_prob = config.get("slow_prob", 0.03)
        self.rng = np.random.default_rng(config.get("seed"))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        time.sleep(self.slow_s if self.rng.random() < self.slow_prob else self.fast_s)
        return self.rng.uniform(-1, 1, 4).astype(np.float32), 1.0, False, False, {}


def slow_env_creator(config):
    return SlowStepEnv(config)


def run_lockstep(env_config: dict, envs: int, seconds: float) -> float:
    """Env steps/s of gymnasium's AsyncVectorEnv (parallel processes, lock-step) with random actions."""
    fns = [functools.partial(SlowStepEnv, {**env_config, "seed": 1000 + i}) for i in range(envs)]
    vec = gym.vector.AsyncVectorEnv(fns)
    try:
        vec.reset(seed=0)
        for _ in range(10):  # warm up
            vec.step(vec.action_space.sample())
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vec.step(vec.action_space.sample())
            steps += envs
        return steps / (time.perf_counter() - start)
    finally:
        vec.close()


def run_ours(env_config: dict, envs: int, seconds: float, asynchronous: bool, in_flight: int | None = None) -> float:
    """Env steps/s of PPO iterations with one rollout actor per env."""
    from algorithms import PPO

    trainer = PPO(
        config={
            "env": "slow-step",
            "env_config": env_config,
            "num_workers": envs,
            "num_envs_per_worker": 1,
            "num_cpus_per_worker": 0.1,
            "num_cpus_for_learner": 1,
            "train_batch_size": 64 * envs,
            "minibatch_size": 64 * envs,
            "num_epochs": 4,
            "sample_async": asynchronous,
            "max_requests_in_flight_per_worker": in_flight,
            "seed": 0,
        }
    )
    try:
        trainer.train()  # actors started, first fragments in
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += trainer.train()["env_steps_this_iter"]
        return steps / (time.perf_counter() - start)
    finally:
        trainer.stop()


def measured_mean_step(env_config: dict, fast_steps: int = 300, slow_steps: int = 10) -> float:
    """Seconds per step of one env, from its measured fast and slow steps (sleep overshoots a little)."""
    fast = SlowStepEnv({**env_config, "slow_prob": 0.0})
    slow = SlowStepEnv({**env_config, "slow_prob": 1.0})
    fast.reset()
    slow.reset()
    start = time.perf_counter()
    for _ in range(fast_steps):
        fast.step(0)
    fast_s = (time.perf_counter() - start) / fast_steps
    start = time.perf_counter()
    for _ in range(slow_steps):
        slow.step(0)
    slow_s = (time.perf_counter() - start) / slow_steps
    p = env_config.get("slow_prob", 0.03)
    return (1 - p) * fast_s + p * slow_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=12.0, help="measuring time per mode (default 12)")
    parser.add_argument("--fast-ms", type=float, default=3.0)
    parser.add_argument("--slow-ms", type=float, default=100.0)
    parser.add_argument("--slow-prob", type=float, default=0.03)
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore")
    import ray

    from algorithms import register_env

    env_config = {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob}
    nominal = (1 - args.slow_prob) * args.fast_ms / 1000 + args.slow_prob * args.slow_ms / 1000
    measured = measured_mean_step(env_config)  # time.sleep overshoots: the env's real mean step
    ideal = args.envs / measured

    from benchmarks.loopback import loopback_only

    loopback_only()
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    register_env("slow-step", slow_env_creator)
    rows = []
    print(f"{args.envs} envs, step {args.fast_ms:g} ms or {args.slow_ms:g} ms (p={args.slow_prob:g}): mean step "
          f"{nominal * 1000:.2f} ms nominal, {measured * 1000:.2f} ms measured (its fast and slow steps timed "
          f"apart); {args.seconds:g} s per mode", flush=True)
    rows.append(("ideal: envs / measured mean step time", ideal))
    rows.append(("lock-step vector env (gymnasium AsyncVectorEnv)", run_lockstep(env_config, args.envs, args.seconds)))
    print(f"  {rows[-1][0]}: {rows[-1][1]:,.0f} steps/s", flush=True)
    rows.append(("ours, synchronous sampling (PPO iterations)", run_ours(env_config, args.envs, args.seconds, False)))
    print(f"  {rows[-1][0]}: {rows[-1][1]:,.0f} steps/s", flush=True)
    rows.append(("ours, asynchronous sampling (PPO iterations)", run_ours(env_config, args.envs, args.seconds, True)))
    print(f"  {rows[-1][0]}: {rows[-1][1]:,.0f} steps/s", flush=True)
    rows.append(("ours, asynchronous, 1 request in flight per actor",
                 run_ours(env_config, args.envs, args.seconds, True, in_flight=1)))
    print(f"  {rows[-1][0]}: {rows[-1][1]:,.0f} steps/s", flush=True)
    rows.append(("ours, asynchronous, 2 requests in flight per actor",
                 run_ours(env_config, args.envs, args.seconds, True, in_flight=2)))
    print(f"  {rows[-1][0]}: {rows[-1][1]:,.0f} steps/s", flush=True)
    ray.shutdown()

    width = max(len(r[0]) for r in rows)
    print(f"\n{'':<{width}}  {'env steps/s':>12}  {'of ideal':>9}  {'vs lock-step':>12}")
    for label, rate in rows:
        print(f"{label:<{width}}  {rate:>12,.0f}  {rate / ideal:>8.0%}  {rate / rows[1][1]:>11.2f}x")
    print(f"\n(with the nominal mean step, {nominal * 1000:.2f} ms, the ideal would be {args.envs / nominal:,.0f} "
          f"steps/s and asynchronous sampling {rows[3][1] / (args.envs / nominal):.0%} of it; "
          f"target: asynchronous >= 80% of ideal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
