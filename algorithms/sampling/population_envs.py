"""Every member's envs of a pack, stepped as one, and each member's own count of them.

A population learner (``algorithms/ppo/population.py``, ``algorithms/dqn/population.py``) acts
for ``P`` members at once, ``N`` envs each. A user's env (stepped env by env anyway) is a vector
env per member, reset from the member's seed, so its episodes are its own whatever its pack, and
one that raises fails its member alone (fresh envs, the error kept for the member's next
result). A natively vectorised gymnasium env (CartPole) is one vector env of ``P x N`` copies for
the pack, member ``m`` the ``m``-th block: stepped in one call (per-member calls would take most
of an iteration), reset and failing as one.

Each member counts its env steps and episodes only while it learns: an env's running episode
that a member joined (or was absent from) halfway through is not its own, nor is its end. A
member's own envs step only while it learns: a pack whose members a scheduler stopped (or that
wait for a late one) costs only what its learning members' envs cost; the slots of a pack-wide
vector env step together (one call), absent ones too.

    envs = PopulationEnvs([{"env": "CartPole-v1", "env_config": {}, "seed": s} for s in (0, 1)], num_envs=4)
    step = envs.step(actions)            # actions [P, N] -> rewards, terminated, done, valid [P, N]
"""

from __future__ import annotations

import traceback
from collections import deque
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from algorithms.envs.registry import make_vector_env
from algorithms.envs.vector_env import SerialVectorEnv

WINDOW = 100  # episodes in episode_return_mean, as every trainer's
F32 = np.float32

__all__ = ["PopulationEnvs", "WINDOW"]


class PopulationEnvs:
    """The pack's envs and each member's counts (see the module docstring). ``members``: each
    member's ``env``, ``env_config`` and ``seed`` (the first's env is every member's); ``what``
    names the learner in errors; ``actions``: the action space's kind the learner takes (a Box's
    bounded)."""

    def __init__(self, members: list[dict[str, Any]], num_envs: int, what: str,
                 actions: type[gym.Space] = gym.spaces.Discrete) -> None:
        self.members = members  # the learner's list, shared: a member's seed as the learner has it
        self.P, self.N = len(self.members), int(num_envs)
        first = self.members[0]
        self._env, self._env_config = first["env"], first["env_config"]
        envs = make_vector_env(self._env, self._env_config, self.N)
        self.per_member = isinstance(envs, SerialVectorEnv)
        if self.per_member:
            self.envs = [envs] + [make_vector_env(self._env, self._env_config, self.N) for _ in range(self.P - 1)]
        else:
            envs.close()
            self.envs = [make_vector_env(self._env, self._env_config, self.P * self.N)]
        self.errors: dict[int, str] = {}  # member -> the traceback of its env's failure, until reported
        obs_space, act_space = self.envs[0].single_observation_space, self.envs[0].single_action_space
        bounded = not isinstance(act_space, gym.spaces.Box) or bool(
            np.all(np.isfinite(act_space.low)) and np.all(np.isfinite(act_space.high)))
        if not (isinstance(obs_space, gym.spaces.Box) and isinstance(act_space, actions) and bounded):
            self.stop()
            raise ValueError(f"pack_trials: packed {what} takes a Box observation and {'bounded ' * (actions is gym.spaces.Box)}"
                             f"{actions.__name__} actions; env {self._env!r} has {obs_space} and {act_space}")
        self.observation_space, self.action_space = obs_space, act_space
        self.obs_dim = int(np.prod(obs_space.shape))
        self.num_actions = int(act_space.n) if isinstance(act_space, gym.spaces.Discrete) else 0
        if self.per_member:
            self.obs = self._flat(np.concatenate([self._reset(m) for m in range(self.P)]))
        else:  # one seed for the pack's envs: a member's episodes depend on its pack
            self.obs = self._flat(self.envs[0].reset(seed=int(first["seed"]) * 10_000 + self.P)[0])
        self.resetting = np.zeros(self.P * self.N, dtype=bool)  # NEXT_STEP autoreset: this step resets the env
        self.running_return = np.zeros(self.P * self.N)
        self.running_length = np.zeros(self.P * self.N, dtype=np.int64)
        self.episodes: list[deque[tuple[float, int]]] = [deque(maxlen=WINDOW) for _ in range(self.P)]
        self.episodes_total = np.zeros(self.P, dtype=np.int64)
        self.env_steps = np.zeros(self.P, dtype=np.int64)
        self.counting = np.ones(self.P * self.N, dtype=bool)  # whether an env's running episode is its member's
        self.learning = np.ones(self.P, dtype=bool)  # the members whose steps count now

    def _flat(self, obs: Any) -> np.ndarray:
        return np.asarray(obs, dtype=F32).reshape(self.P, self.N, self.obs_dim)

    def _reset(self, m: int) -> np.ndarray:
        """Member ``m``'s envs reset from its seed; their first observations."""
        return np.asarray(self.envs[m].reset(seed=int(self.members[m]["seed"]) * 10_000)[0])

    def step(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        """Every env stepped with ``actions`` ``[P, N, *action_shape]``; :attr:`obs` becomes the next
        observations. Returns ``[P, N]`` arrays: ``rewards`` (0 on reset steps), ``terminated``,
        ``done`` (bool, real steps only), ``valid`` (False on the NEXT_STEP reset steps, and for
        the envs of a member that does not learn now where they wait, see the module docstring) and
        ``next_obs`` ``[P, N, obs_dim]`` (for a done step the episode's final observation)."""
        stepped = np.repeat(self.learning, self.N) if self.per_member else np.ones(self.P * self.N, dtype=bool)
        next_obs, rewards, terminated, truncated = self._step(actions)
        valid = ~self.resetting & stepped
        done = (terminated | truncated) & valid
        self._count(rewards, valid, done)
        self.resetting = np.where(stepped, done, self.resetting)  # an env not stepped resets when it next steps
        self.obs = self._flat(next_obs)
        P, N = self.P, self.N
        return {"rewards": np.where(valid, rewards, 0.0).astype(F32).reshape(P, N),
                "terminated": (terminated & valid).reshape(P, N), "done": done.reshape(P, N),
                "valid": valid.reshape(P, N), "next_obs": self.obs}

    def _step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if not self.per_member:
            obs, rewards, terminated, truncated, _ = self.envs[0].step(actions.reshape((-1, *actions.shape[2:])))
            return np.asarray(obs), np.asarray(rewards), np.asarray(terminated, bool), np.asarray(truncated, bool)
        parts: list[tuple[Any, ...]] = []
        for m, envs in enumerate(self.envs):
            if not self.learning[m]:  # its envs wait where they are (see the module docstring)
                parts.append((self.obs[m].reshape(self.N, *self.observation_space.shape), np.zeros(self.N),
                              np.zeros(self.N, dtype=bool), np.zeros(self.N, dtype=bool)))
                continue
            try:
                parts.append(envs.step(actions[m])[:4])
            except Exception:  # noqa: BLE001 - any error of a user's env is its member's failure
                self.errors[m] = traceback.format_exc()
                try:
                    envs.close()
                except Exception:  # noqa: BLE001 - broken already
                    pass
                self.envs[m] = make_vector_env(self._env, self._env_config, self.N)
                self.counting[m * self.N:(m + 1) * self.N] = False
                parts.append((self._reset(m), np.zeros(self.N), np.zeros(self.N, dtype=bool), np.ones(self.N, dtype=bool)))
        obs, rewards, terminated, truncated = (np.concatenate([np.asarray(p[i]) for p in parts]) for i in range(4))
        return obs, rewards, terminated.astype(bool), truncated.astype(bool)

    def _count(self, rewards: np.ndarray, valid: np.ndarray, done: np.ndarray) -> None:
        self.running_return += np.where(valid, rewards, 0.0)
        self.running_length += valid
        self.env_steps += valid.reshape(self.P, self.N).sum(axis=1) * self.learning
        learning_envs = np.repeat(self.learning, self.N)
        self.counting &= learning_envs
        for i in np.flatnonzero(done):
            member = i // self.N
            if self.counting[i]:
                self.episodes[member].append((float(self.running_return[i]), int(self.running_length[i])))
                self.episodes_total[member] += 1
            self.running_return[i], self.running_length[i] = 0.0, 0
            self.counting[i] = learning_envs[i]  # the next episode is the member's from its first step

    def join(self, m: int) -> None:
        """Member ``m`` (the learner's, just changed) starts with no steps or episodes of its own;
        its own envs start anew from its seed, as a trial's would."""
        self.restart_counts(m, 0, 0, [])
        self.errors.pop(m, None)
        envs = slice(m * self.N, (m + 1) * self.N)
        if self.per_member:
            self.obs[m] = self._reset(m).reshape(self.N, self.obs_dim)
            self.resetting[envs], self.running_return[envs], self.running_length[envs] = False, 0.0, 0
        self.counting[envs] = self.per_member  # else its envs' running episodes are not its own

    def restart_counts(self, m: int, env_steps: int, episodes_total: int, episodes: Sequence[tuple[float, int]]) -> None:
        """Member ``m``'s env steps, episode count and window are these (a restore's or an exploit's;
        its envs go on with the episodes they are in, as a trial's own do)."""
        self.env_steps[m], self.episodes_total[m] = env_steps, episodes_total
        self.episodes[m] = deque(((float(r), int(n)) for r, n in episodes), maxlen=WINDOW)

    def counts(self, m: int) -> dict[str, Any]:
        """Member ``m``'s env steps, episode count and window (copies)."""
        return {"env_steps": int(self.env_steps[m]), "episodes_total": int(self.episodes_total[m]),
                "episodes": list(self.episodes[m])}

    def episode_stats(self, m: int) -> dict[str, Any]:
        """Member ``m``'s result keys of its episodes, as every trainer's."""
        returns = [r for r, _ in self.episodes[m]]
        lengths = [n for _, n in self.episodes[m]]
        return {"env_steps_total": int(self.env_steps[m]), "episodes_total": int(self.episodes_total[m]),
                "episode_return_mean": float(np.mean(returns)) if returns else float("nan"),
                "episode_len_mean": float(np.mean(lengths)) if lengths else float("nan")}

    def stop(self) -> None:
        for envs in getattr(self, "envs", []):
            envs.close()
