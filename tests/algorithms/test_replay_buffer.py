"""n-step transitions of a fragment against a by-hand loop; the ring buffer's order, eviction and state."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.replay_buffer import ReplayBuffer, transitions

T, N, D = 7, 3, 2


def _fragment(rng):
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    valid = np.ones((T, N), bool)
    terminated[1, 0] = True  # env 0 terminates at t=1: t=2 is its reset step
    valid[2, 0] = False
    truncated[4, 1] = True  # env 1 is cut off at t=4: t=5 is its reset step (obs[5] is the final observation)
    valid[5, 1] = False
    return {"obs": rng.normal(size=(T, N, D)).astype(np.float32), "actions": rng.integers(0, 3, size=(T, N)),
            "rewards": rng.normal(size=(T, N)).astype(np.float32), "terminated": terminated,
            "truncated": truncated, "valid": valid, "last_obs": rng.normal(size=(N, D)).astype(np.float32)}


def _by_hand(f, gamma, n):
    rows = []
    for t in range(T):  # row-major over (t, env), as the flat batch
        for e in range(N):
            if not f["valid"][t, e]:
                continue
            reward, discount, k = 0.0, 1.0, t
            while True:
                reward += discount * f["rewards"][k, e]
                discount *= gamma
                done = f["terminated"][k, e] or f["truncated"][k, e]
                if done or k - t + 1 == n or k + 1 == T:
                    break
                k += 1
            next_obs = f["obs"][k + 1, e] if k + 1 < T else f["last_obs"][e]
            rows.append((f["obs"][t, e], f["actions"][t, e], reward, next_obs,
                         0.0 if f["terminated"][k, e] else discount))
    return rows


@pytest.mark.parametrize("n", [1, 3])
def test_transitions_match_a_by_hand_loop(n):
    f = _fragment(np.random.default_rng(n))
    got = transitions(f, gamma=0.9, n_step=n)
    want = _by_hand(f, 0.9, n)
    assert len(got["rewards"]) == len(want) == f["valid"].sum()
    for i, (obs, action, reward, next_obs, discount) in enumerate(want):
        np.testing.assert_array_equal(got["obs"][i], obs)
        assert got["actions"][i] == action
        assert got["rewards"][i] == pytest.approx(reward, rel=1e-6)
        np.testing.assert_array_equal(got["next_obs"][i], next_obs)
        assert got["discounts"][i] == pytest.approx(discount, rel=1e-6)


def test_a_terminated_step_does_not_bootstrap_and_a_truncated_one_does_from_its_final_observation():
    f = _fragment(np.random.default_rng(0))
    got = transitions(f, gamma=0.9, n_step=1)
    flat = [(t, e) for t in range(T) for e in range(N) if f["valid"][t, e]]
    terminated, truncated = flat.index((1, 0)), flat.index((4, 1))
    assert got["discounts"][terminated] == 0.0
    assert got["discounts"][truncated] == pytest.approx(0.9)
    np.testing.assert_array_equal(got["next_obs"][truncated], f["obs"][5, 1])


def test_the_ring_buffer_evicts_the_oldest_and_its_state_round_trips():
    buffer = ReplayBuffer(capacity=5, obs_dim=1, action_shape=(), action_dtype=np.int64)
    batch = lambda lo, hi: {"obs": np.arange(lo, hi, dtype=np.float32)[:, None],  # noqa: E731
                            "actions": np.arange(lo, hi), "rewards": np.arange(lo, hi, dtype=np.float32),
                            "next_obs": np.zeros((hi - lo, 1), np.float32), "discounts": np.ones(hi - lo, np.float32)}
    buffer.add(batch(0, 3))
    buffer.add(batch(3, 7))
    assert len(buffer) == 5
    state = buffer.state()
    assert state["actions"].tolist() == [2, 3, 4, 5, 6]  # oldest first, 0 and 1 evicted
    restored = ReplayBuffer(capacity=5, obs_dim=1, action_shape=(), action_dtype=np.int64)
    restored.load_state(state)
    assert restored.state()["actions"].tolist() == [2, 3, 4, 5, 6]
    sample = restored.sample(64, np.random.default_rng(0))
    assert set(sample["actions"].tolist()) == {2, 3, 4, 5, 6}
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(capacity=2, obs_dim=1, action_shape=(), action_dtype=np.int64).sample(1, np.random.default_rng(0))
