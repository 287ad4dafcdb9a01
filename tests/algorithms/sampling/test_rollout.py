"""Rollouts without Ray: GAE with NEXT_STEP autoreset, episode stats, the 100-episode window, envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from algorithms import PPO, register_env
from algorithms.sampling.fragment import Fragment
from algorithms.data.gae import compute_gae
from algorithms.envs.registry import make_vector_env, resolve_env
from algorithms.sampling.episodes import EpisodeWindow
from algorithms.sampling.rollout_worker import RolloutWorker
from algorithms.envs.vector_env import SerialVectorEnv


class StepCountEnv(gym.Env):
    """Episode k of an env lasts (k % 5) + 1 steps, reward 1 per step: its return is its length.

    The observation is (k % 5, steps so far); with ``truncate`` episodes end by time limit.
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.truncate = bool((config or {}).get("truncate", False))
        self.k = -1
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k += 1
        self.t = 0
        return np.array([self.k % 5, 0], np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.k % 5 + 1
        obs = np.array([self.k % 5, self.t], np.float32)
        return obs, 1.0, done and not self.truncate, done and self.truncate, {}


def step_count_env(config):
    return StepCountEnv(config)


class ValueIsTimePolicy:
    """A stub policy: action 0, log-prob 0, V(obs) = obs[1] (steps so far in the episode)."""

    def act(self, obs, rng, explore=True):
        n = len(obs)
        return np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.float32), obs[:, 1].copy()

    def value(self, obs):
        return obs[:, 1].copy()

    def load_weights(self, weights):
        pass

    def begin_fragment(self):
        pass


def reference_gae(values, rewards, terminated, truncated, valid, last_values, gamma, lam):
    """Per-env, per-step loops: the textbook recursion with NEXT_STEP reset steps skipped."""
    T, N = values.shape
    adv = np.zeros((T, N))
    for i in range(N):
        gae = 0.0
        for t in reversed(range(T)):
            if not valid[t, i]:
                gae = 0.0
                continue
            next_v = values[t + 1, i] if t + 1 < T else last_values[i]
            if terminated[t, i]:
                gae = rewards[t, i] - values[t, i]
            elif truncated[t, i]:
                gae = rewards[t, i] + gamma * next_v - values[t, i]
            else:
                gae = rewards[t, i] + gamma * next_v - values[t, i] + gamma * lam * gae
            adv[t, i] = gae
    return adv


def _fragment(values, rewards, terminated, truncated, valid, last_values):
    T, N = values.shape
    return Fragment(
        obs=np.arange(T * N, dtype=np.float32).reshape(T, N, 1), actions=np.zeros((T, N), np.int64),
        logp=np.zeros((T, N), np.float32), values=values.astype(np.float32), rewards=rewards.astype(np.float32),
        terminated=terminated, truncated=truncated, valid=valid, last_obs=np.zeros((N, 1), np.float32),
        last_values=last_values.astype(np.float32), episode_returns=np.zeros(0), episode_lens=np.zeros(0, np.int64),
    )


def test_gae_by_hand_truncation_bootstraps_from_final_observation():
    # t0 step; t1 truncated (final obs value 2.0 is computed at the reset step t2); t2 reset; t3 terminated
    values = np.array([[0.5], [0.6], [2.0], [0.7]])
    rewards = np.array([[1.0], [1.0], [0.0], [1.0]])
    terminated = np.array([[False], [False], [False], [True]])
    truncated = np.array([[False], [True], [False], [False]])
    valid = np.array([[True], [True], [False], [True]])
    batch = compute_gae(_fragment(values, rewards, terminated, truncated, valid, np.array([0.9])), gamma=0.9, lambda_=0.8)
    adv1 = 1 + 0.9 * 2.0 - 0.6
    adv0 = (1 + 0.9 * 0.6 - 0.5) + 0.9 * 0.8 * adv1
    np.testing.assert_allclose(batch.advantages, [adv0, adv1, 1 - 0.7], rtol=1e-6)
    np.testing.assert_allclose(batch.returns, batch.advantages + np.array([0.5, 0.6, 0.7]), rtol=1e-6)
    np.testing.assert_array_equal(batch.obs[:, 0], [0, 1, 3])  # the reset step is dropped
    assert batch.env_steps == 3 and batch.slots == 4


def test_gae_matches_reference_on_random_fragments():
    rng = np.random.default_rng(0)
    for _ in range(20):
        T, N = rng.integers(1, 30), rng.integers(1, 6)
        done = rng.random((T, N)) < 0.15
        terminated = done & (rng.random((T, N)) < 0.5)
        truncated = done & ~terminated
        valid = np.ones((T, N), bool)
        valid[0] = rng.random(N) < 0.8
        valid[1:] = ~done[:-1]
        terminated &= valid  # a reset step never ends an episode
        truncated &= valid
        values, rewards, last = rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=N)
        batch = compute_gae(_fragment(values, rewards, terminated, truncated, valid, last), gamma=0.97, lambda_=0.9)
        expected = reference_gae(values, rewards, terminated, truncated, valid, last, 0.97, 0.9)
        np.testing.assert_allclose(batch.advantages, expected.reshape(-1)[valid.reshape(-1)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("truncate", [False, True])
def test_worker_next_step_autoreset_values_and_episode_stats(truncate):
    worker = RolloutWorker(
        env=step_count_env,
        env_config={"truncate": truncate},
        num_envs=2,
        policy_factory=lambda: None,
        policy_kwargs={},
        seed=0,
        policy=ValueIsTimePolicy(),
    )
    fragments = [worker.sample(7) for _ in range(3)]  # episodes cross fragment boundaries
    returns = np.concatenate([f.episode_returns for f in fragments])
    lens = np.concatenate([f.episode_lens for f in fragments])
    # Per env, 21 steps: episodes of 1, 2, 3, 4, 5, 1 steps and a reset step after each of the
    # first five (NEXT_STEP); the 2 envs run in lockstep.
    np.testing.assert_array_equal(returns, [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 1, 1])
    np.testing.assert_array_equal(lens, returns)
    for f in fragments:
        done = f.terminated | f.truncated
        assert not (done & ~f.valid).any()
        assert (f.terminated.any() != truncate) or not done.any()
        # At each reset step the worker acted on the final observation: V = episode length.
        t, i = np.nonzero(~f.valid)
        assert (f.values[t, i] >= 1).all()
        assert (f.rewards[~f.valid] == 0).all()
    assert sum(int(f.valid.sum()) for f in fragments) == 2 * (21 - 5)


def test_episode_window_keeps_the_last_100_completed_episodes():
    window = EpisodeWindow(100)
    window.add(np.arange(60.0), np.arange(60))
    window.add(np.arange(60.0, 130.0), np.arange(60, 130))
    m = window.metrics()
    assert m["episode_return_mean"] == pytest.approx(np.arange(30, 130).mean())
    assert m["episode_return_min"] == 30 and m["episode_return_max"] == 129
    assert window.episodes_total == 130
    restored = EpisodeWindow(100)
    restored.load_state(window.state())
    assert restored.metrics() == m and restored.episodes_total == 130
    assert np.isnan(EpisodeWindow().metrics()["episode_return_mean"])


def test_trainer_metric_window_is_the_last_100_episodes_not_the_iteration():
    register_env("step-count-test", step_count_env)
    trainer = PPO(config={"env": "step-count-test", "num_envs_per_worker": 3, "train_batch_size": 150,
                          "minibatch_size": 150, "num_epochs": 1, "seed": 0})
    try:
        for _ in range(4):
            result = trainer.train()
        assert result["episodes_this_iter"] < 100 < result["episodes_total"]
        rounds = result["episodes_total"] // 3  # 3 envs in lockstep finish episode k together
        lengths = np.repeat([k % 5 + 1 for k in range(rounds)], 3)[-100:]
        assert result["episode_return_mean"] == pytest.approx(lengths.mean())
        assert result["episode_len_mean"] == pytest.approx(lengths.mean())
        assert result["episode_return_min"] == 1 and result["episode_return_max"] == 5
        # 4 x 50 steps of 3 envs, less one NEXT_STEP reset step after each episode but maybe the last
        assert 600 - result["episodes_total"] <= result["env_steps_total"] <= 600 - result["episodes_total"] + 3
    finally:
        trainer.stop()


def test_vector_env_kinds_and_unknown_env():
    cart = make_vector_env("CartPole-v1", {}, 4)
    assert type(cart.unwrapped).__name__ == "CartPoleVectorEnv"  # gymnasium's native vectorised one
    pend = make_vector_env("Pendulum-v1", {}, 2)
    assert isinstance(pend, SerialVectorEnv)
    assert pend.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    cart.close()
    pend.close()
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        resolve_env("NoSuchEnv-v0")


def test_episode_stats_match_a_step_by_step_count_across_fragments():
    rng = np.random.default_rng(1)
    worker = RolloutWorker.__new__(RolloutWorker)  # only the episode bookkeeping is exercised
    N = 5
    worker.num_envs = N
    worker.ep_return, worker.ep_len = np.zeros(N), np.zeros(N, np.int64)
    ref_return, ref_len = np.zeros(N), np.zeros(N, np.int64)
    prev_done = np.zeros(N, bool)
    for _ in range(30):
        T = int(rng.integers(1, 12))
        rewards = rng.normal(size=(T, N)).astype(np.float32)
        done = rng.random((T, N)) < 0.2
        valid = np.empty((T, N), bool)
        valid[0] = ~prev_done
        valid[1:] = ~done[:-1]
        done &= valid
        expected_returns, expected_lens = [], []
        for t in range(T):
            ref_return += rewards[t] * valid[t]
            ref_len += valid[t]
            for i in np.flatnonzero(done[t]):
                expected_returns.append(ref_return[i])
                expected_lens.append(ref_len[i])
                ref_return[i], ref_len[i] = 0.0, 0
        prev_done = done[-1]
        returns, lens = worker._episode_stats(rewards, valid, done)
        np.testing.assert_allclose(returns, expected_returns, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(lens, expected_lens)
        np.testing.assert_allclose(worker.ep_return, ref_return, rtol=1e-5, atol=1e-5)
