"""Running normalisation statistics: merged in any order to the statistics of all the rows, reward
scaling by the discounted return computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.data.normalization import CLIP, EPS, Normalizer, NormalizerStats, RunningStat


def test_merging_deltas_in_any_order_gives_the_statistics_of_every_row():
    rng = np.random.default_rng(0)
    parts = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 7, 50, 3)]
    everything = np.concatenate(parts)
    for order in ([0, 1, 2, 3], [3, 1, 0, 2]):
        stat = RunningStat.empty((4,))
        for i in order:
            delta = RunningStat.empty((4,))
            delta.update(parts[i])
            stat.merge(RunningStat.from_state(delta.state()))  # as it travels: plain data
        assert stat.count == len(everything)
        np.testing.assert_allclose(stat.mean, everything.mean(axis=0))
        np.testing.assert_allclose(stat.var, everything.var(axis=0))


def test_observations_are_normalised_with_what_was_seen_and_clipped():
    norm = Normalizer((2,), num_envs=2, gamma=None)
    first = norm.observe(np.array([[1.0, 10.0], [3.0, 10.0]], np.float32))
    np.testing.assert_allclose(first, [[-1.0, 0.0], [1.0, 0.0]], atol=1e-4)  # mean (2, 10), std (1, 0)
    frozen = NormalizerStats.from_state(norm.current.state()).normalize(np.array([[1e6, 10.0]], np.float32))
    assert frozen[0, 0] == CLIP and frozen.dtype == np.float32  # frozen: the outlier is not counted in
    norm.observe(np.array([[2.0, 10.0], [2.0, 10.0]], np.float32))
    delta = norm.take_delta()
    assert delta["obs"]["count"] == 4 and norm.take_delta()["obs"]["count"] == 0


def test_rewards_are_divided_by_the_std_of_the_discounted_return():
    gamma = 0.9
    norm = Normalizer(None, num_envs=2, gamma=gamma)
    rewards = np.array([[1.0, 2.0], [1.0, 0.0], [0.0, 5.0], [1.0, 1.0]], np.float32)
    valid = np.array([[True, True], [True, True], [False, True], [True, True]])  # env 0 resets at step 2
    done = np.array([[False, False], [True, False], [False, False], [False, False]])
    scaled = norm.rewards(rewards, valid, done)
    returns, ret = [], np.zeros(2)  # by hand: ret = gamma ret + r over valid steps, 0 after an episode's end
    for t in range(4):
        for i in range(2):
            if valid[t, i]:
                ret[i] = gamma * ret[i] + rewards[t, i]
                returns.append(ret[i])
            if done[t, i]:
                ret[i] = 0.0
    np.testing.assert_allclose(scaled, rewards / np.sqrt(np.var(returns) + EPS), rtol=1e-5)
    assert norm.take_delta()["ret"]["count"] == len(returns) == 7


def test_the_learners_statistics_reach_a_worker_with_what_it_saw_since():
    worker = Normalizer((1,), num_envs=1, gamma=None)
    learner = NormalizerStats.empty((1,), rewards=False)
    worker.observe(np.array([[1.0]]))
    learner.merge(worker.take_delta())
    worker.observe(np.array([[5.0]]))  # seen after the delta went
    other = RunningStat.empty((1,))
    other.update(np.array([[3.0], [3.0]]))
    learner.obs.merge(other)  # another worker's
    worker.sync(learner.state())
    assert worker.current.obs.count == 4
    assert worker.current.obs.mean == pytest.approx([3.0])
