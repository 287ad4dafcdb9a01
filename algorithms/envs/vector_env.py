"""Envs stepped one after another in the rollout worker's process, behind gymnasium's vector API.

A rollout actor of a slow simulator steps one env or a few, thousands of times a second in all,
and what it does between two env steps is CPU the machine's cores share with every other actor.
gymnasium's ``SyncVectorEnv`` merges every env's info dict into the batch's, deep-copies the
observations and checks the actions' layout at every step; a rollout worker reads none of it.
:class:`SerialVectorEnv` does the same stepping, NEXT_STEP autoreset included, without that work.

    >>> import gymnasium as gym
    >>> envs = SerialVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    >>> obs, _ = envs.reset(seed=0)          # env i is seeded with 0 + i, as SyncVectorEnv does
    >>> obs, rewards, terminated, truncated, _ = envs.step(envs.action_space.sample())
    >>> obs.shape, rewards.dtype
    ((2, 4), dtype('float64'))
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array


class SerialVectorEnv(gym.vector.VectorEnv):
    """``len(env_fns)`` envs stepped in turn, in NEXT_STEP autoreset mode: the step that ends an
    episode returns its final observation, and the env's next step resets it (its action ignored,
    reward 0, not terminated). Observations are stacked into a new array at every step; infos are
    not collected (``{}``). ``reset(seed=s)`` seeds env ``i`` with ``s + i``."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        if not env_fns:
            raise ValueError("SerialVectorEnv needs at least one env")
        self.envs = [fn() for fn in env_fns]
        first = self.envs[0]
        for i, env in enumerate(self.envs[1:], start=1):
            if env.observation_space != first.observation_space or env.action_space != first.action_space:
                raise ValueError(f"env {i} has other spaces than env 0: every env of a vector env must have the same")
        self.num_envs = len(self.envs)
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self.metadata = {**getattr(first, "metadata", {}), "autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.render_mode = first.render_mode
        self._obs_dtype = self.observation_space.dtype
        # Dict and Tuple observations batch key by key (a dict of arrays); the others as one array.
        self._composite = isinstance(first.observation_space, (gym.spaces.Dict, gym.spaces.Tuple))
        self._autoreset = [False] * self.num_envs

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset: {len(seeds)} seeds for {self.num_envs} envs")
        obs = [env.reset(seed=s, options=options)[0] for env, s in zip(self.envs, seeds)]
        self._autoreset = [False] * self.num_envs
        return self._batch(obs), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        n = self.num_envs
        obs: list[Any] = [None] * n
        rewards = np.zeros(n)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        autoreset = self._autoreset
        for i, env in enumerate(self.envs):
            if autoreset[i]:
                obs[i], _ = env.reset()
                autoreset[i] = False
            else:
                obs[i], rewards[i], terminated[i], truncated[i], _ = env.step(actions[i])
                autoreset[i] = bool(terminated[i] or truncated[i])
        return self._batch(obs), rewards, terminated, truncated, {}

    def _batch(self, obs: list[Any]) -> Any:
        if self._composite:
            space = self.single_observation_space
            out: Any = create_empty_array(space, self.num_envs)
            return concatenate(space, obs, out)
        return np.asarray(obs, dtype=self._obs_dtype)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
