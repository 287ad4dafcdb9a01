"""Running normalisation of what envs return: observations (RLlib's ``MeanStdFilter``) and rewards
scaled by the spread of the discounted return (SB3's ``VecNormalize(norm_reward=True)``).

Each rollout worker holds a :class:`Normalizer`. It normalises with the statistics the learner
last sent (merged with what it has seen since) and counts what it sees into a *delta*, which
goes to the learner with each fragment (``Fragment.filter_delta``). The learner merges every
worker's deltas into the trial's statistics (:class:`NormalizerStats`, Chan et al.'s parallel
update, so the order of merging does not matter), keeps them in checkpoints, and sends them back
with the weights. Evaluation and a loaded agent use them frozen. Normalised values are clipped
to +-:data:`CLIP`, as both libraries do by default.

Rewards are divided by the standard deviation of each env's running discounted return
(``ret = gamma * ret + r``, reset at an episode's end), not centred: a reward's sign is kept.
Episode returns in results are always the env's own rewards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

__all__ = ["CLIP", "EPS", "FILTER_KEY", "FILTERS", "Normalizer", "NormalizerStats", "RunningStat"]

#: Where the statistics travel in a weights dict (the rollout worker takes them out).
FILTER_KEY = "__normalizer__"
FILTERS = ("NoFilter", "MeanStdFilter")
CLIP = 10.0
EPS = 1e-8


@dataclasses.dataclass
class RunningStat:
    """Count, mean and sum of squared deviations of the rows seen (Welford; merged as Chan et al.)."""

    count: float
    mean: np.ndarray
    m2: np.ndarray

    @classmethod
    def empty(cls, shape: tuple[int, ...]) -> RunningStat:
        return cls(0.0, np.zeros(shape, np.float64), np.zeros(shape, np.float64))

    def update(self, rows: np.ndarray) -> None:
        """Count ``rows`` (shape (n, *shape)) in."""
        n = len(rows)
        if n == 0:
            return
        rows = np.asarray(rows, dtype=np.float64)
        mean = rows.mean(axis=0)
        self.merge(RunningStat(float(n), mean, ((rows - mean) ** 2).sum(axis=0)))

    def merge(self, other: RunningStat) -> None:
        """Count what ``other`` counted in."""
        if other.count == 0:
            return
        total = self.count + other.count
        delta = other.mean - self.mean
        self.mean = self.mean + delta * (other.count / total)
        self.m2 = self.m2 + other.m2 + delta**2 * (self.count * other.count / total)
        self.count = total

    @property
    def var(self) -> np.ndarray:
        return self.m2 / self.count if self.count > 0 else np.ones_like(self.m2)

    def copy(self) -> RunningStat:
        return RunningStat(self.count, self.mean.copy(), self.m2.copy())

    def state(self) -> dict[str, Any]:
        """Plain data (a checkpoint keeps it, torch's safe loader reads it back)."""
        return {"count": float(self.count), "mean": self.mean.tolist(), "m2": self.m2.tolist()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RunningStat:
        return cls(float(state["count"]), np.array(state["mean"], dtype=np.float64),
                   np.array(state["m2"], dtype=np.float64))


@dataclasses.dataclass
class NormalizerStats:
    """A trial's statistics: of observations (None: not normalised) and of discounted returns (None: rewards as they are)."""

    obs: RunningStat | None
    ret: RunningStat | None

    @classmethod
    def empty(cls, obs_shape: tuple[int, ...] | None, rewards: bool) -> NormalizerStats:
        return cls(None if obs_shape is None else RunningStat.empty(obs_shape),
                   RunningStat.empty(()) if rewards else None)

    def merge(self, delta: Mapping[str, Any]) -> None:
        """Count a worker's delta (:meth:`Normalizer.take_delta`) in."""
        if self.obs is not None and delta.get("obs") is not None:
            self.obs.merge(RunningStat.from_state(delta["obs"]))
        if self.ret is not None and delta.get("ret") is not None:
            self.ret.merge(RunningStat.from_state(delta["ret"]))

    def state(self) -> dict[str, Any]:
        return {"obs": None if self.obs is None else self.obs.state(),
                "ret": None if self.ret is None else self.ret.state()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> NormalizerStats:
        return cls(None if state.get("obs") is None else RunningStat.from_state(state["obs"]),
                   None if state.get("ret") is None else RunningStat.from_state(state["ret"]))

    def normalize(self, obs: Any) -> Any:
        """``obs`` normalised with these statistics, frozen (evaluation, a loaded agent)."""
        if self.obs is None:
            return obs
        return _scaled(obs, self.obs.mean, self.obs.var)


def _scaled(obs: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    out = (np.asarray(obs, dtype=np.float64) - mean) / np.sqrt(var + EPS)
    return np.clip(out, -CLIP, CLIP).astype(np.asarray(obs).dtype, copy=False)


class Normalizer:
    """A rollout worker's normalisation of ``num_envs`` envs (see the module)."""

    def __init__(self, obs_shape: tuple[int, ...] | None, num_envs: int, gamma: float | None) -> None:
        self.current = NormalizerStats.empty(obs_shape, gamma is not None)  # the learner's, plus what was seen since
        self.delta = NormalizerStats.empty(obs_shape, gamma is not None)
        self.gamma = gamma
        self._ret = np.zeros(num_envs, np.float64)

    def sync(self, state: Mapping[str, Any]) -> None:
        """Normalise from now on with the learner's statistics ``state`` and what was seen since
        the last delta was taken."""
        current = NormalizerStats.from_state(state)
        current.merge(self.delta.state())
        self.current = current

    def observe(self, obs: Any) -> Any:
        """Count a vector step's observations (N, *shape) in; return them normalised."""
        stats = self.current.obs
        if stats is None:
            return obs
        self.current.obs.update(obs)  # type: ignore[union-attr]
        self.delta.obs.update(obs)  # type: ignore[union-attr]
        return _scaled(obs, stats.mean, stats.var)

    def rewards(self, rewards: np.ndarray, valid: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Steps' rewards (T, N) scaled, the discounted returns counted in (a step that is no
        transition, ``valid`` False, changes nothing; ``done`` ends an env's return)."""
        if self.gamma is None or self.current.ret is None or self.delta.ret is None:
            return rewards
        for t in range(len(rewards)):
            live = valid[t]
            self._ret = np.where(live, self._ret * self.gamma + rewards[t], self._ret)
            self.current.ret.update(self._ret[live])
            self.delta.ret.update(self._ret[live])
            self._ret = np.where(done[t], 0.0, self._ret)
        scale = np.sqrt(self.current.ret.var + EPS)
        return np.clip(rewards / scale, -CLIP, CLIP).astype(rewards.dtype, copy=False)

    def take_delta(self) -> dict[str, Any]:
        """What was counted since the last call (for the learner), and a fresh count."""
        delta = self.delta.state()
        self.delta = NormalizerStats.empty(None if self.current.obs is None else self.current.obs.mean.shape,
                                           self.gamma is not None)
        return delta
