"""Fragments and train batches: what crosses from sampling to learning, typed and never changed
in place; both go through Ray's object store whole."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.sampling.fragment import Fragment, TrainBatch, concat_batches

T, N = 6, 2


def _streamed() -> Fragment:
    done = np.zeros((T, N), dtype=bool)
    done[1, 0] = done[4, 1] = True  # episodes end at t=1 (env 0), then t=4 (env 1)
    return Fragment(
        obs=np.arange(T * N * 3, dtype=np.float32).reshape(T, N, 3), actions=np.zeros((T, N), np.int64),
        logp=np.zeros((T, N), np.float32), values=np.zeros((T, N), np.float32), rewards=np.ones((T, N), np.float32),
        terminated=done, truncated=np.zeros((T, N), bool), valid=np.ones((T, N), bool),
        last_obs=np.full((N, 3), -1.0, np.float32), last_values=None, episode_returns=np.array([2.0, 5.0]),
        episode_lens=np.array([2, 5]), sample_time_s=0.6, weights_version=3,
        weights_versions=np.array([3, 3, 4, 4, 4, 4]), worker_index=1, node="n",
    )


def test_a_streamed_fragment_cut_in_two_keeps_every_step_and_episode_once():
    fragment = _streamed()
    head, tail = fragment.split(3)
    assert head.valid.shape == (3, N) and tail.valid.shape == (3, N)
    np.testing.assert_array_equal(head.last_obs, fragment.obs[3])  # bootstraps where the tail starts
    np.testing.assert_array_equal(tail.last_obs, fragment.last_obs)
    assert head.episode_returns.tolist() == [2.0] and tail.episode_returns.tolist() == [5.0]
    assert (head.weights_version, tail.weights_version) == (3, 4)
    assert head.sample_time_s + tail.sample_time_s == pytest.approx(0.6)
    assert (head.worker_index, tail.node) == (1, "n")
    np.testing.assert_array_equal(np.concatenate([head.obs, tail.obs]), fragment.obs)
    with pytest.raises(ValueError, match="t=6"):
        fragment.split(6)


def test_a_fragment_is_never_changed_in_place():
    fragment = _streamed()
    with pytest.raises(AttributeError):
        fragment.values = np.ones((T, N), np.float32)  # type: ignore[misc]
    bootstrapped = fragment.replace(last_values=np.zeros(N, np.float32))
    assert fragment.last_values is None and bootstrapped.obs is fragment.obs
    assert (fragment.num_steps, fragment.slots, fragment.env_steps) == (T, T * N, T * N)


def test_batches_concatenate_arrays_and_add_counts():
    def batch(n: int, stale: int) -> TrainBatch:
        column = np.arange(n, dtype=np.float32)
        return TrainBatch(obs=column[:, None], actions=column, logp=column, values=column, advantages=column,
                          returns=column, is_weight=np.ones(n, np.float32), episode_returns=np.array([1.0]),
                          episode_lens=np.array([n]), env_steps=n, slots=n + 1, stale_steps=stale)

    joined = concat_batches([batch(2, 1), batch(3, 0)])
    assert (joined.env_steps, joined.slots, joined.stale_steps) == (5, 7, 1)
    assert joined.obs.shape == (5, 1) and joined.episode_lens.tolist() == [2, 3]
    assert concat_batches([batch(2, 0)]).env_steps == 2


def test_fragments_and_batches_round_trip_through_ray(ray_session):
    import ray

    fragment = _streamed()
    back = ray.get(ray.put(fragment))
    assert isinstance(back, Fragment) and back.weights_version == 3 and back.node == "n"
    for name in ("obs", "actions", "terminated", "weights_versions", "episode_lens"):
        np.testing.assert_array_equal(getattr(back, name), getattr(fragment, name))
        assert getattr(back, name).dtype == getattr(fragment, name).dtype

    @ray.remote(num_cpus=0)
    def learn(fragments: list[Fragment]) -> TrainBatch:
        from algorithms.data.gae import compute_gae

        return concat_batches([compute_gae(f.replace(last_values=np.zeros(N, np.float32)), 0.9, 0.9)
                                for f in fragments])

    batch = ray.get(learn.remote([fragment, fragment]))
    assert isinstance(batch, TrainBatch) and batch.env_steps == 2 * T * N and batch.obs.dtype == np.float32
