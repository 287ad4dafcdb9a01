"""n-step transitions of a fragment against a by-hand loop; the ring buffer's order, eviction and state."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.sampling.fragment import TIME_MAJOR, Fragment
from algorithms.data.replay_buffer import FIELDS, NStepTransitions, ReplayBuffer, transitions

T, N, D = 7, 3, 2


def _fragment(rng):
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    valid = np.ones((T, N), bool)
    terminated[1, 0] = True  # env 0 terminates at t=1: t=2 is its reset step
    valid[2, 0] = False
    truncated[4, 1] = True  # env 1 is cut off at t=4: t=5 is its reset step (obs[5] is the final observation)
    valid[5, 1] = False
    zeros = np.zeros((T, N), np.float32)
    return Fragment(obs=rng.normal(size=(T, N, D)).astype(np.float32), actions=rng.integers(0, 3, size=(T, N)),
                    logp=zeros, values=zeros, rewards=rng.normal(size=(T, N)).astype(np.float32),
                    terminated=terminated, truncated=truncated, valid=valid,
                    last_obs=rng.normal(size=(N, D)).astype(np.float32), last_values=None,
                    episode_returns=np.zeros(0, np.float32), episode_lens=np.zeros(0, np.int64), worker_index=1)


def _by_hand(f, gamma, n):
    rows = []
    for t in range(T):  # row-major over (t, env), as the flat batch
        for e in range(N):
            if not f.valid[t, e]:
                continue
            reward, discount, k = 0.0, 1.0, t
            while True:
                reward += discount * f.rewards[k, e]
                discount *= gamma
                done = f.terminated[k, e] or f.truncated[k, e]
                if done or k - t + 1 == n or k + 1 == T:
                    break
                k += 1
            next_obs = f.obs[k + 1, e] if k + 1 < T else f.last_obs[e]
            rows.append((f.obs[t, e], f.actions[t, e], reward, next_obs,
                         0.0 if f.terminated[k, e] else discount))
    return rows


@pytest.mark.parametrize("n", [1, 3])
def test_transitions_match_a_by_hand_loop(n):
    f = _fragment(np.random.default_rng(n))
    got = transitions(f, gamma=0.9, n_step=n)
    want = _by_hand(f, 0.9, n)
    assert len(got["rewards"]) == len(want) == f.valid.sum()
    for i, (obs, action, reward, next_obs, discount) in enumerate(want):
        np.testing.assert_array_equal(got["obs"][i], obs)
        assert got["actions"][i] == action
        assert got["rewards"][i] == pytest.approx(reward, rel=1e-6)
        np.testing.assert_array_equal(got["next_obs"][i], next_obs)
        assert got["discounts"][i] == pytest.approx(discount, rel=1e-6)


def test_a_terminated_step_does_not_bootstrap_and_a_truncated_one_does_from_its_final_observation():
    f = _fragment(np.random.default_rng(0))
    got = transitions(f, gamma=0.9, n_step=1)
    flat = [(t, e) for t in range(T) for e in range(N) if f.valid[t, e]]
    terminated, truncated = flat.index((1, 0)), flat.index((4, 1))
    assert got["discounts"][terminated] == 0.0
    assert got["discounts"][truncated] == pytest.approx(0.9)
    np.testing.assert_array_equal(got["next_obs"][truncated], f.obs[5, 1])


def test_the_ring_buffer_evicts_the_oldest_and_its_state_round_trips():
    buffer = ReplayBuffer(capacity=5, observations=1, action_shape=(), action_dtype=np.int64)
    batch = lambda lo, hi: {"obs": np.arange(lo, hi, dtype=np.float32)[:, None],  # noqa: E731
                            "actions": np.arange(lo, hi), "rewards": np.arange(lo, hi, dtype=np.float32),
                            "next_obs": np.zeros((hi - lo, 1), np.float32), "discounts": np.ones(hi - lo, np.float32)}
    buffer.add(batch(0, 3))
    buffer.add(batch(3, 7))
    assert len(buffer) == 5
    state = buffer.state()
    assert state["actions"].tolist() == [2, 3, 4, 5, 6]  # oldest first, 0 and 1 evicted
    restored = ReplayBuffer(capacity=5, observations=1, action_shape=(), action_dtype=np.int64)
    restored.load_state(state)
    assert restored.state()["actions"].tolist() == [2, 3, 4, 5, 6]
    sample = restored.sample(64, np.random.default_rng(0))
    assert set(sample["actions"].tolist()) == {2, 3, 4, 5, 6}
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(capacity=2, observations=1, action_shape=(), action_dtype=np.int64).sample(1, np.random.default_rng(0))


def _rows(f, start, stop, last_obs):
    """Rows [start, stop) of fragment ``f`` as a fragment of their own, ending on ``last_obs``."""
    from algorithms.data.observations import tree_map

    return f.replace(**{k: tree_map(lambda x: x[start:stop], getattr(f, k)) for k in TIME_MAJOR
                        if getattr(f, k) is not None}, last_obs=last_obs)


@pytest.mark.parametrize("piece", [1, 2])
def test_n_step_windows_cross_the_fragments_of_a_stream(piece):
    """Fed the fragment in pieces of ``piece`` rows (SAC's train_freq=1 samples one row per
    round), the stream gives the whole fragment's 3-step transitions, as one fragment would:
    every window complete, the last two rows held back for the next piece."""
    f = _fragment(np.random.default_rng(7))
    assemble = NStepTransitions(gamma=0.9, n_step=3)
    outs = []
    for start in range(0, T, piece):
        stop = min(start + piece, T)
        outs.append(assemble(_rows(f, start, stop, f.obs[stop] if stop < T else f.last_obs)))
    got = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
    want = transitions(f, gamma=0.9, n_step=3, starts=T - 2)
    assert len(want["rewards"]) == f.valid[: T - 2].sum()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)


def test_held_rows_not_continued_by_the_next_fragment_become_transitions_on_their_own():
    """A worker replaced or reconfigured starts from a new observation: its held rows are not
    joined to what follows, they end where they ended (shortened windows, as one fragment's)."""
    f = _fragment(np.random.default_rng(8))
    assemble = NStepTransitions(gamma=0.9, n_step=3)
    head = _rows(f, 0, 4, f.obs[4])
    first = assemble(head)
    np.testing.assert_allclose(first["rewards"], transitions(head, 0.9, 3, starts=2)["rewards"], rtol=1e-6)
    other = _fragment(np.random.default_rng(9))  # starts from an observation the held rows did not end on
    second = assemble(other)
    held = _rows(f, 2, 4, f.obs[4])
    want = {k: np.concatenate([transitions(held, 0.9, 3)[k], transitions(other, 0.9, 3, starts=T - 2)[k]])
            for k in first}
    for k in want:
        np.testing.assert_allclose(second[k], want[k], rtol=1e-6)


def test_held_rows_of_dict_observations_become_transitions_on_their_own():
    """The same with observations of a Dict space (a tree of arrays), as rollout actors streaming
    fragments of such an env give them: each leaf is joined as the arrays are."""
    from algorithms.data.observations import concat, leaves

    def as_dict(f):
        return f.replace(obs={"x": f.obs, "first": f.obs[..., 0].copy()},
                         last_obs={"x": f.last_obs, "first": f.last_obs[..., 0].copy()})

    f, other = as_dict(_fragment(np.random.default_rng(8))), as_dict(_fragment(np.random.default_rng(9)))
    assemble = NStepTransitions(gamma=0.9, n_step=3)
    head = _rows(f, 0, 4, {"x": f.obs["x"][4], "first": f.obs["first"][4]})
    assemble(head)
    second = assemble(other)  # starts from an observation the held rows did not end on
    held = _rows(f, 2, 4, {"x": f.obs["x"][4], "first": f.obs["first"][4]})
    want = {k: concat([transitions(held, 0.9, 3)[k], transitions(other, 0.9, 3, starts=T - 2)[k]]) for k in FIELDS}
    for k in FIELDS:
        assert len(leaves(second[k])) == len(leaves(want[k]))
        for got_leaf, want_leaf in zip(leaves(second[k]), leaves(want[k])):
            np.testing.assert_allclose(got_leaf, want_leaf, rtol=1e-6)
    assert set(second["obs"]) == {"x", "first"} and second["obs"]["first"].shape == (len(second["rewards"]),)


def test_one_step_transitions_are_each_fragments_own():
    f = _fragment(np.random.default_rng(10))
    got = NStepTransitions(gamma=0.9, n_step=1)(f)
    want = transitions(f, gamma=0.9, n_step=1)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
