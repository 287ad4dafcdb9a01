"""PopulationEnvs (algorithms/sampling/population_envs.py): a pack's envs, and what a member that
does not learn now costs. A member's own envs (a user's env, stepped env by env) wait while it
does not learn, and go on where they were when it learns again; the slots of a pack-wide vector
env (CartPole) step together, absent ones uncounted."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import numpy as np

from algorithms.sampling.population_envs import PopulationEnvs


class StepCounting(gym.Env):
    """CartPole that counts its steps by the member whose seed reset it (``STEPS[seed]``)."""

    STEPS: Counter[int] = Counter()

    def __init__(self, config=None):
        self.inner = gym.make("CartPole-v1")
        self.observation_space, self.action_space = self.inner.observation_space, self.inner.action_space
        self.member = -1

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.member = seed // 10_000
        return self.inner.reset(seed=seed, options=options)

    def step(self, action):
        StepCounting.STEPS[self.member] += 1
        return self.inner.step(action)


def _members(env, seeds=(0, 1, 2)):
    return [{"env": env, "env_config": {}, "seed": seed} for seed in seeds]


def test_a_member_that_does_not_learn_leaves_its_own_envs_waiting():
    StepCounting.STEPS.clear()
    envs = PopulationEnvs(_members(StepCounting), num_envs=2, what="PPO")
    try:
        assert envs.per_member
        envs.learning = np.array([True, False, True])
        waiting = envs.obs[1].copy()
        for _ in range(5):
            step = envs.step(np.zeros((3, 2), dtype=np.int64))
            assert not step["valid"][1].any() and not step["done"][1].any() and (step["rewards"][1] == 0).all()
        assert StepCounting.STEPS[1] == 0 and StepCounting.STEPS[0] == StepCounting.STEPS[2] == 10
        np.testing.assert_array_equal(envs.obs[1], waiting)
        assert envs.env_steps.tolist() == [10, 0, 10]
        envs.learning = np.ones(3, dtype=bool)  # back: its envs go on from where they waited
        step = envs.step(np.zeros((3, 2), dtype=np.int64))
        assert StepCounting.STEPS[1] == 2 and step["valid"][1].all() and not np.array_equal(envs.obs[1], waiting)
        assert envs.env_steps.tolist() == [12, 2, 12]
    finally:
        envs.stop()


def test_a_waiting_env_that_was_to_reset_resets_when_it_steps_again():
    envs = PopulationEnvs(_members(StepCounting, seeds=(0, 1)), num_envs=1, what="PPO")
    try:
        while not envs.resetting[1]:  # member 1's episode ends (CartPole falls with one action)
            envs.step(np.zeros((2, 1), dtype=np.int64))
        envs.learning = np.array([True, False])
        envs.step(np.zeros((2, 1), dtype=np.int64))
        assert envs.resetting[1]  # still owed its reset step
        envs.learning = np.ones(2, dtype=bool)
        step = envs.step(np.zeros((2, 1), dtype=np.int64))
        assert not step["valid"][1, 0]  # the NEXT_STEP reset step, no env step of its own
    finally:
        envs.stop()


def test_a_pack_wide_vector_env_steps_every_slot_and_counts_the_learning_members_only():
    envs = PopulationEnvs(_members("CartPole-v1"), num_envs=2, what="PPO")
    try:
        assert not envs.per_member
        envs.learning = np.array([True, False, True])
        for _ in range(5):
            envs.step(np.zeros((3, 2), dtype=np.int64))
        assert envs.env_steps.tolist() == [10, 0, 10]
    finally:
        envs.stop()
