"""Prioritized experience replay (Schaul et al. 2016, the proportional variant): transitions drawn
with probability ``p_i ** alpha / sum_k p_k ** alpha``, ``p_i = |TD error_i| + eps``, each with the
importance weight ``(N P(i)) ** -beta`` (divided by the batch's largest: weights <= 1, as in the
paper and Dopamine) that corrects the update for the skewed draw.

A :class:`SumTree` holds the ``p ** alpha`` of every slot: a draw is a prefix sum found by one walk
down the tree, an update one walk up, both vectorised over a batch. New transitions get the
largest priority seen so far (every transition is replayed at least once soon), unless the one
who adds them knows their TD errors (Ape-X's actors do).

    buffer = PrioritizedReplayBuffer(50_000, env.observation_space, (), np.int64, alpha=0.6, beta=0.4)
    buffer.add(transitions(fragment, gamma=0.99))
    batch = buffer.sample(32, rng)                    # + "indices" and "weights"
    buffer.update_priorities(batch["indices"], td_errors)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from algorithms.data.observations import index
from algorithms.data.replay_buffer import FIELDS, ReplayBuffer


class SumTree:
    """Sums of a fixed number of non-negative values, over a power-of-two-padded binary tree."""

    def __init__(self, capacity: int) -> None:
        self.leaves = 1 << max(0, capacity - 1).bit_length()
        self.tree = np.zeros(2 * self.leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def get(self, slots: np.ndarray) -> np.ndarray:
        return self.tree[np.asarray(slots) + self.leaves]

    def set(self, slots: np.ndarray, values: np.ndarray) -> None:
        """The values of ``slots`` (a slot given twice takes its last value), the sums above them renewed."""
        nodes = np.asarray(slots, dtype=np.int64) + self.leaves
        self.tree[nodes] = values
        nodes = np.unique(nodes // 2)
        while nodes.size and nodes[0] >= 1:
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            nodes = np.unique(nodes // 2)

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """For each prefix sum in [0, total), the slot whose interval of the running sum holds it."""
        prefix = np.array(prefix, dtype=np.float64)
        nodes = np.ones(len(prefix), dtype=np.int64)
        for _ in range(self.leaves.bit_length() - 1):  # the tree's depth: every walk ends at a leaf
            left = 2 * nodes
            right = prefix >= self.tree[left]
            prefix = np.where(right, prefix - self.tree[left], prefix)
            nodes = np.where(right, left + 1, left)
        return nodes - self.leaves

    def clear(self) -> None:
        self.tree[:] = 0.0


class PrioritizedReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` drawn in proportion to priorities (see the module docstring)."""

    def __init__(self, capacity: int, observations: gym.Space | int, action_shape: tuple[int, ...],
                 action_dtype: Any, alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-6) -> None:
        super().__init__(capacity, observations, action_shape, action_dtype)
        if alpha < 0 or eps <= 0:
            raise ValueError(f"prioritized replay needs alpha >= 0 and eps > 0, got alpha={alpha}, eps={eps}")
        self.alpha, self.eps = float(alpha), float(eps)
        self.beta = float(beta)  # the importance weights' exponent: a sample's default
        self.tree = SumTree(self.capacity)
        self.max_priority = 1.0

    def add(self, batch: dict[str, Any], td_errors: np.ndarray | None = None) -> np.ndarray:
        """Append transitions with the priorities of their ``td_errors`` (else the batch's own
        ``"td_errors"``: Ape-X's actors'), or where there are none or one is NaN, the largest
        priority seen so far."""
        slots = super().add(batch)
        if td_errors is None:
            td_errors = batch.get("td_errors")
        if td_errors is None:
            priorities = np.full(len(slots), self.max_priority)
        else:
            priorities = np.abs(np.asarray(td_errors, dtype=np.float64))[-len(slots):] + self.eps
            known = ~np.isnan(priorities)
            self.max_priority = max(self.max_priority, float(priorities[known].max(initial=0.0)))
            priorities = np.where(known, priorities, self.max_priority)
        self.tree.set(slots, priorities ** self.alpha)
        return slots

    def sample(self, batch_size: int, rng: np.random.Generator, beta: float | None = None) -> dict[str, Any]:
        """``batch_size`` transitions, one from each of ``batch_size`` equal strata of the priority
        mass (the paper's sampling), with their ``indices`` and importance ``weights`` (exponent
        ``beta``, else the buffer's)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        total = self.tree.total
        prefix = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        # rounding can carry a prefix past the last filled slot: it takes the last one
        slots = np.minimum(self.tree.find(np.minimum(prefix, np.nextafter(total, 0))), self.size - 1)
        probabilities = self.tree.get(slots) / total
        weights = (self.size * np.maximum(probabilities, 1e-12)) ** -float(self.beta if beta is None else beta)
        out = {key: index(self.data[key], slots) for key in FIELDS}
        out["indices"] = slots.astype(np.int64)
        out["weights"] = (weights / weights.max()).astype(np.float32)
        return out

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities ``|td_errors| + eps`` for the transitions drawn from ``slots``."""
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max(initial=0.0)))
        self.tree.set(np.asarray(slots), priorities ** self.alpha)

    def state(self) -> dict[str, Any]:
        """The content in insertion order with each transition's ``p ** alpha``, and the largest priority."""
        return {**super().state(), "priorities": self.tree.get(self._order()).copy(),
                "max_priority": self.max_priority}

    def clear(self) -> None:
        super().clear()
        self.tree.clear()
        self.max_priority = 1.0

    def load_state(self, state: dict[str, Any]) -> None:
        """Refill from :meth:`state`, priorities included (a state without them: each the largest seen)."""
        super().load_state(state)
        if "priorities" in state:
            kept = np.asarray(state["priorities"], dtype=np.float64)[-self.size:]
            self.tree.clear()
            self.tree.set(self._order(), kept)
            self.max_priority = float(state.get("max_priority", 1.0))
