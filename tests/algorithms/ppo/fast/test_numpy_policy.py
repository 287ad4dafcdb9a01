"""The rollout side's network in numpy: its initial weights, drawn without torch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic


@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))], ids=["discrete", "box"])
def test_initial_weights_follow_sb3s_orthogonal_scheme_and_the_seed(action_space):
    def drawn(seed):
        policy = make_numpy_actor_critic(obs_dim=4, action_space=action_space, hidden_sizes=[64, 32], activation="tanh")
        policy.reset_parameters(np.random.default_rng(seed))
        return policy.get_weights()

    weights = drawn(0)
    first, second, out = weights["weights.0"], weights["weights.1"], weights["weights.2"]
    for net in range(2):  # policy and value function: sqrt(2) times (semi-)orthogonal matrices
        np.testing.assert_allclose(first[net] @ first[net].T, 2 * np.eye(4), atol=1e-5)  # 4 x 64: orthonormal rows
        np.testing.assert_allclose(second[net].T @ second[net], 2 * np.eye(32), atol=1e-5)  # 64 x 32: columns
    np.testing.assert_allclose(out[0].T @ out[0], 0.01**2 * np.eye(out.shape[2]), atol=1e-7)  # policy head
    np.testing.assert_allclose(np.linalg.norm(out[1, :, 0]), 1.0, rtol=1e-5)  # value head: its first column
    assert not out[1, :, 1:].any()  # the value function's unused outputs
    assert all(not array.any() for name, array in weights.items() if not name.startswith("weights."))
    assert all(np.array_equal(weights[name], array) for name, array in drawn(0).items())
    assert not np.array_equal(weights["weights.0"], drawn(1)["weights.0"])
