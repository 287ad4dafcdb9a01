"""A slow, uneven simulator: CartPole's dynamics behind a step that takes milliseconds.

The workload the nested trainers exist for is a CPU simulator whose step usually takes a few
milliseconds and now and then much longer (a physics engine's contact solve, a game server's
hiccup, a remote service). ``SlowCartPole`` stands in for one: CartPole-v1's dynamics and rewards,
and a ``step()`` that sleeps ``fast_ms`` (3 ms) usually and ``slow_ms`` (100 ms) with probability
``slow_prob`` (3 %). Sleeping instead of computing lets a few cores host a cluster's worth of
simulators, which is what the README's demo and ``benchmarks/slow_sim.py`` use it for; a
CPU-bound simulator needs one real core per env instead.

    import gymnasium as gym
    env = gym.make("tuner/SlowCartPole-v1", fast_ms=3.0, slow_ms=100.0, slow_prob=0.03)

The id is registered with gymnasium when ``algorithms`` is imported; in a process that has not
imported it, ``"algorithms.envs.builtin:tuner/SlowCartPole-v1"`` imports it first.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from schedulers.validation import is_number

ENV_ID = "tuner/SlowCartPole-v1"


class SlowCartPole(CartPoleEnv):
    """CartPole-v1 whose ``step()`` takes ``fast_ms``, or ``slow_ms`` with probability ``slow_prob``.

    Which steps are slow is drawn from the env's own generator, seeded by ``reset(seed=...)``,
    so a seeded run is slow at the same steps every time.
    """

    def __init__(self, fast_ms: float = 3.0, slow_ms: float = 100.0, slow_prob: float = 0.03,
                 render_mode: str | None = None) -> None:
        for key, value in (("fast_ms", fast_ms), ("slow_ms", slow_ms)):
            if not is_number(value, numpy=False) or value < 0:
                raise ValueError(f"SlowCartPole: {key} must be a number of milliseconds >= 0, got {value!r}")
        if not is_number(slow_prob, numpy=False) or not 0 <= slow_prob <= 1:
            raise ValueError(f"SlowCartPole: slow_prob must be a probability in [0, 1], got {slow_prob!r}")
        super().__init__(render_mode=render_mode)
        self.fast_s, self.slow_s, self.slow_prob = fast_ms / 1000, slow_ms / 1000, float(slow_prob)
        self._delays = np.random.default_rng()

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self._delays = np.random.default_rng([seed, 0x51])
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        slow = self.slow_prob > 0 and self._delays.random() < self.slow_prob
        time.sleep(self.slow_s if slow else self.fast_s)
        return super().step(action)

    def mean_step_s(self) -> float:
        """The nominal mean seconds per step (``time.sleep`` overshoots it a little)."""
        return (1 - self.slow_prob) * self.fast_s + self.slow_prob * self.slow_s


def measure_mean_step(env_config: dict[str, Any] | None = None, fast_steps: int = 200, slow_steps: int = 5,
                      env_class: type | None = None) -> float:
    """Seconds per step of one ``SlowCartPole`` (or ``env_class``, built with the same keys) as
    this machine runs it: its fast and slow steps timed apart (sleep overshoots), weighted by
    ``slow_prob``."""
    config = dict(env_config or {})
    p = float(config.get("slow_prob", 0.03))
    timings = []
    for prob, steps in ((0.0, fast_steps), (1.0, slow_steps)):
        env = (env_class or SlowCartPole)(**{**config, "slow_prob": prob})
        env.reset(seed=0)
        start = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(0)
            if terminated or truncated:
                env.reset()
        timings.append((time.perf_counter() - start) / steps)
        env.close()
    return (1 - p) * timings[0] + p * timings[1]


def register() -> None:
    """Register ``tuner/SlowCartPole-v1`` with gymnasium (done when ``algorithms`` is imported)."""
    if ENV_ID not in gym.registry:
        # gymnasium's EnvCreator protocol wants a bare **kwargs constructor; any Env class is accepted
        gym.register(id=ENV_ID, entry_point=SlowCartPole,  # type: ignore[arg-type]
                     max_episode_steps=500, reward_threshold=475.0)
