"""SerialVectorEnv steps envs exactly as gymnasium's SyncVectorEnv does in NEXT_STEP mode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from algorithms.envs.vector_env import SerialVectorEnv


@pytest.mark.parametrize("env_id, steps", [("CartPole-v1", 400), ("Pendulum-v1", 450), ("FrozenLake-v1", 300)],
                         ids=["terminations", "truncations", "discrete-observations"])
def test_the_same_observations_rewards_and_episode_ends_as_sync_vector_env(env_id, steps):
    n = 3
    ours = SerialVectorEnv([lambda: gym.make(env_id) for _ in range(n)])
    theirs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(n)],
                                      autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    assert ours.observation_space == theirs.observation_space and ours.action_space == theirs.action_space
    obs_a, _ = ours.reset(seed=7)
    obs_b, _ = theirs.reset(seed=7)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert obs_a.dtype == obs_b.dtype
    theirs.action_space.seed(0)
    ends = 0
    for _ in range(steps):
        actions = theirs.action_space.sample()
        a, b = ours.step(actions), theirs.step(actions)
        for x, y in zip(a[:4], b[:4]):
            np.testing.assert_array_equal(x, y)
        ends += int((a[2] | a[3]).sum())
    assert ends >= n  # episodes ended (and the envs autoreset) along the way
    ours.close()
    theirs.close()
    assert ours.closed


def test_envs_with_other_spaces_and_a_wrong_number_of_seeds_are_refused():
    with pytest.raises(ValueError, match="env 1 has other spaces than env 0"):
        SerialVectorEnv([lambda: gym.make("CartPole-v1"), lambda: gym.make("Pendulum-v1")])
    envs = SerialVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    with pytest.raises(ValueError, match="3 seeds for 2 envs"):
        envs.reset(seed=[1, 2, 3])
    obs, _ = envs.reset(seed=[1, None])
    assert obs.shape == (2, 4)
    envs.close()
