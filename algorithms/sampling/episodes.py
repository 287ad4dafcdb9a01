"""The window of a trial's last finished episodes, whose mean return is what a sweep tunes on."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


class EpisodeWindow:
    """Returns and lengths of the last ``size`` completed episodes of all the trial's envs.

    The rl-zoo / SB3 ``ep_rew_mean`` definition; not the episodes of the last iteration only.
    """

    def __init__(self, size: int = 100) -> None:
        self.size = size
        self.returns = np.zeros(0)
        self.lens = np.zeros(0, dtype=np.int64)
        self.episodes_total = 0

    def add(self, returns: np.ndarray, lens: np.ndarray) -> None:
        self.episodes_total += len(returns)
        self.returns = np.concatenate([self.returns, np.asarray(returns, dtype=np.float64)])[-self.size :]
        self.lens = np.concatenate([self.lens, np.asarray(lens, dtype=np.int64)])[-self.size :]

    def metrics(self) -> dict[str, float]:
        if len(self.returns) == 0:
            nan = float("nan")
            return {"episode_return_mean": nan, "episode_return_min": nan, "episode_return_max": nan, "episode_len_mean": nan}
        return {
            "episode_return_mean": float(self.returns.mean()),
            "episode_return_min": float(self.returns.min()),
            "episode_return_max": float(self.returns.max()),
            "episode_len_mean": float(self.lens.mean()),
        }

    def state(self) -> dict[str, Any]:
        return {"returns": self.returns.tolist(), "lens": self.lens.tolist(), "episodes_total": self.episodes_total}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.returns = np.asarray(state["returns"], dtype=np.float64)[-self.size :]
        self.lens = np.asarray(state["lens"], dtype=np.int64)[-self.size :]
        self.episodes_total = int(state["episodes_total"])
