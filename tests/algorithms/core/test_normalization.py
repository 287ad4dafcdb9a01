"""Normalisation in the trainers: statistics merged across rollout actors, rewards scaled for
learning while results keep the env's returns, frozen in evaluation, kept in checkpoints and
applied by a loaded agent; bad settings refused with the key named."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from algorithms import DQN, PPO, SAC, load_agent, register_env

SMALL = {"train_batch_size": 240, "minibatch_size": 120, "num_epochs": 1, "num_envs_per_worker": 3}


class WorkerValueEnv(gym.Env):
    """Observes its rollout worker's index (plus the step), 5 steps an episode, reward 1 each."""

    observation_space = gym.spaces.Box(-100.0, 100.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config):
        self.value = float(config.worker_index)
        self.t = 0

    def _obs(self):
        return np.array([self.value, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 5, False, {}


register_env("worker-value", lambda config: WorkerValueEnv(config))


@pytest.mark.usefixtures("ray_session")
def test_statistics_merge_every_rollout_actors_observations():
    # actor 1 observes 1.0, actor 2 observes 2.0, the same number of steps each (synchronous
    # sampling): the trial's mean is 1.5 and its variance 0.25 only if both actors' counts merged
    trainer = PPO(config={"env": "worker-value", "seed": 0, **SMALL, "num_workers": 2, "num_cpus_per_worker": 0.25,
                          "observation_filter": "MeanStdFilter", "normalize_reward": True})
    try:
        results = [trainer.train() for _ in range(2)]
        stats = trainer.normalizer_stats
        # every observation an env returned: 2 x 240 vector-step slots and each env's first one
        assert stats.obs.count == 2 * 240 + 2 * 3
        assert stats.obs.mean[0] == pytest.approx(1.5) and stats.obs.var[0] == pytest.approx(0.25)
        assert stats.ret.count == results[-1]["env_steps_total"]  # a discounted return per transition
        assert results[-1]["episode_return_mean"] == 5.0  # results keep the env's own rewards
    finally:
        trainer.stop()


@pytest.mark.parametrize("cls, env", [(PPO, "worker-value"), (DQN, "worker-value"), (SAC, "Pendulum-v1")],
                         ids=["PPO", "DQN", "SAC"])
def test_statistics_are_frozen_in_evaluation_kept_in_checkpoints_and_applied_by_a_loaded_agent(tmp_path, cls, env):
    extra = SMALL if cls is PPO else {"learning_starts": 32, "train_freq": 16, "min_sample_timesteps_per_iteration":
                                      64, "train_batch_size": 32, "hidden_sizes": [16]}
    config = {"env": env, "seed": 1, **extra, "observation_filter": "MeanStdFilter", "evaluation_interval": 1,
              "evaluation_duration": 2}
    trainer = cls(config=config)
    try:
        trainer.train()
        before = trainer.normalizer_stats.obs.count
        trainer.evaluator.evaluate(trainer.weights_to_send, trainer.normalizer_stats)
        assert trainer.normalizer_stats.obs.count == before  # evaluation counts nothing in
        path = trainer.save(str(tmp_path / "ck"))
        agent = load_agent(path)
        try:
            np.testing.assert_allclose(agent.normalizer_stats.obs.mean, trainer.normalizer_stats.obs.mean)
            obs = agent.make_env().reset(seed=3)[0]
            from algorithms.data.observations import batch_of

            normalized = trainer.normalizer_stats.normalize(batch_of(agent.observation_space, [obs]))
            by_hand = agent.policy.act(normalized, np.random.default_rng(0), explore=False)[0][0]
            assert np.all(agent.act(obs) == by_hand)  # the loaded agent acts on normalised observations
        finally:
            agent.stop()
    finally:
        trainer.stop()


@pytest.mark.parametrize("config, match", [
    ({"observation_filter": "Mean"}, r"'observation_filter': must be one of \['NoFilter', 'MeanStdFilter'\]"),
    ({"normalize_reward": 1}, "'normalize_reward': must be True or False"),
    ({"env": "FrozenLake-v1", "observation_filter": "MeanStdFilter"},
     "'observation_filter': 'MeanStdFilter' normalises a Box of floats that is not an image"),
    ({"observation_filter": "MeanStdFilter", "env_threads": True, "num_workers": 1, "sample_async": True},
     "'env_threads': True takes no normalisation"),
])
def test_bad_normalisation_settings_name_their_key(config, match):
    with pytest.raises(ValueError, match=match):
        PPO.prepare_trial({"env": "CartPole-v1", **config})
