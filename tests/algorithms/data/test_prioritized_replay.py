"""Prioritized replay: the sum tree against numpy's cumulative sums, draws in proportion to
priorities, the importance weights by hand, new transitions at the largest priority, the state
kept across eviction."""

from __future__ import annotations

import numpy as np
import pytest
from algorithms.data.prioritized_replay import PrioritizedReplayBuffer, SumTree


def _transitions(n: int, start: int = 0) -> dict[str, np.ndarray]:
    obs = np.arange(start, start + n, dtype=np.float32)[:, None]
    return {"obs": obs, "actions": np.zeros(n, np.int64), "rewards": obs[:, 0].copy(), "next_obs": obs + 1,
            "discounts": np.full(n, 0.99, np.float32)}


@pytest.mark.parametrize("capacity", [1, 5, 8, 13])
def test_the_sum_tree_finds_each_prefix_in_the_slot_numpy_finds_it_in(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    values = rng.random(capacity)
    tree.set(np.arange(capacity), values)
    tree.set(np.array([0, 0]), np.array([5.0, values[0]]))  # a slot given twice: its last value
    assert tree.total == pytest.approx(values.sum())
    prefix = rng.random(1000) * values.sum()
    np.testing.assert_array_equal(tree.find(prefix), np.searchsorted(np.cumsum(values), prefix, side="right"))
    np.testing.assert_allclose(tree.get(np.arange(capacity)), values)


def test_draws_follow_the_priorities_and_the_weights_are_the_papers():
    buffer = PrioritizedReplayBuffer(6, 1, (), np.int64, alpha=0.5, beta=0.7)
    buffer.add(_transitions(4))  # 4 of 6 slots: empty ones are never drawn
    td = np.array([0.0, 1.0, 3.0, 8.0])
    buffer.update_priorities(np.arange(4), td)
    expected = (np.abs(td) + buffer.eps) ** 0.5
    expected /= expected.sum()
    batch = buffer.sample(40_000, np.random.default_rng(0))
    counts = np.bincount(batch["indices"], minlength=6)
    assert counts[4:].sum() == 0
    np.testing.assert_allclose(counts[:4] / counts.sum(), expected, atol=0.01)
    np.testing.assert_array_equal(batch["obs"][:, 0], batch["indices"].astype(np.float32))  # rows of those slots
    weights = (4 * expected[batch["indices"]]) ** -0.7
    np.testing.assert_allclose(batch["weights"], weights / weights.max(), rtol=1e-5)


def test_new_transitions_come_in_at_the_largest_priority_seen():
    buffer = PrioritizedReplayBuffer(8, 1, (), np.int64, alpha=1.0)
    buffer.add(_transitions(2))
    buffer.update_priorities(np.array([0, 1]), np.array([0.5, 4.0]))
    buffer.add(_transitions(1, start=2))
    assert buffer.tree.get(np.array([2]))[0] == pytest.approx(4.0 + buffer.eps)
    buffer.add(_transitions(1, start=3), td_errors=np.array([-2.0]))  # known TD errors: theirs
    assert buffer.tree.get(np.array([3]))[0] == pytest.approx(2.0 + buffer.eps)


def test_the_state_keeps_order_and_priorities_across_eviction():
    buffer = PrioritizedReplayBuffer(5, 1, (), np.int64, alpha=1.0)
    buffer.add(_transitions(7))  # wraps: slots hold 2..6
    buffer.update_priorities(np.arange(5), np.arange(5) + 1.0)
    state = buffer.state()
    restored = PrioritizedReplayBuffer(5, 1, (), np.int64, alpha=1.0)
    restored.load_state(state)
    np.testing.assert_array_equal(restored.state()["obs"], state["obs"])
    np.testing.assert_allclose(restored.state()["priorities"], state["priorities"])
    assert restored.max_priority == buffer.max_priority and restored.tree.total == pytest.approx(buffer.tree.total)
