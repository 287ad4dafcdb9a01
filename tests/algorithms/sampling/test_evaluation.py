"""Evaluation episodes: the episodes played are those of their seeds, with the deterministic policy,
in the learner's process or on evaluation actors alike, and no training env ever gets their seeds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from algorithms import A2C, APPO, DQN, ES, PPO, SAC, TD3, register_env
from algorithms.core.agent import play
from algorithms.sampling.evaluation import EVAL_SEED_LOW, evaluation_seeds

OFF_POLICY = {"hidden_sizes": [32], "min_sample_timesteps_per_iteration": 64, "train_freq": 16, "gradient_steps": 4,
              "learning_starts": 32, "train_batch_size": 32, "replay_buffer_config": {"capacity": 1000}}
TRAINERS = {
    "PPO": (PPO, "CartPole-v1", {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 2}),
    "A2C": (A2C, "CartPole-v1", {"train_batch_size": 64}),
    "DQN": (DQN, "CartPole-v1", OFF_POLICY),
    "SAC": (SAC, "Pendulum-v1", OFF_POLICY),
    "TD3": (TD3, "Pendulum-v1", OFF_POLICY),
    "APPO": (APPO, "CartPole-v1", {"num_workers": 0, "train_batch_size": 64, "min_sample_timesteps_per_iteration": 64}),
    "ES": (ES, "CartPole-v1", {"num_workers": 0, "episodes_per_batch": 4, "train_batch_size": 64,
                               "noise_size": 100_000, "hidden_sizes": [8]}),
}


def test_evaluation_seeds_are_the_trials_own_and_never_a_training_envs():
    seeds = evaluation_seeds(7, 0, 5)
    assert seeds == [seeds[0] + i for i in range(5)] and seeds == evaluation_seeds(7, 0, 5)
    assert seeds != evaluation_seeds(8, 0, 5)
    many = [s for seed in range(0, 2**31, 2**26) for s in evaluation_seeds(seed, 0, 100)]
    # training envs are seeded below 2**31 plus their index in the vector env
    assert min(many) >= EVAL_SEED_LOW > 2**31 + 2**16 and max(many) < 2**32


@pytest.mark.parametrize("name", list(TRAINERS))
def test_an_evaluation_is_the_deterministic_policys_episodes_from_its_seeds(name, tmp_path):
    cls, env, small = TRAINERS[name]
    trainer = cls(config={"env": env, "seed": 3, "num_envs_per_worker": 4, **small, "evaluation_interval": 2,
                          "evaluation_duration": 6})
    try:
        first, second = trainer.train(), trainer.train()
        at_two = trainer.save(str(tmp_path / "at2"))
        third = trainer.train()
        evaluation = second["evaluation"]
        assert first["evaluation"]["iteration"] == 1 and evaluation["iteration"] == 2
        assert third["evaluation"] == evaluation  # iteration 3 carries the latest evaluation
        assert evaluation["num_episodes"] == 6
        # the agent evaluated at iteration 2 played by hand on the same seeds: the same episodes
        trainer.restore(at_two)
        by_hand = play(trainer, trainer.make_env(), 6, evaluation_seeds(3, 0, 1)[0])
        assert trainer.last_evaluation == evaluation  # restored with the checkpoint
        returns = np.array([e.episode_return for e in by_hand])
        assert evaluation["episode_return_mean"] == pytest.approx(returns.mean(), rel=1e-4, abs=1e-3)
        assert evaluation["episode_return_std"] == pytest.approx(returns.std(), rel=1e-3, abs=1e-2)
        assert evaluation["episode_len_mean"] == pytest.approx(np.mean([e.length for e in by_hand]))
        assert evaluation["env_steps"] == sum(e.length for e in by_hand)
    finally:
        trainer.stop()


def test_timesteps_play_whole_episodes_until_the_budget_is_reached():
    trainer = PPO(config={"env": "CartPole-v1", "seed": 0, **TRAINERS["PPO"][2], "evaluation_interval": 1,
                          "evaluation_duration": 100, "evaluation_duration_unit": "timesteps",
                          "evaluation_config": {"num_envs_per_worker": 2}})
    try:
        evaluation = trainer.train()["evaluation"]
    finally:
        trainer.stop()
    assert evaluation["env_steps"] >= 100 and evaluation["num_episodes"] >= 2
    # every episode played to its end: the steps are the episodes' lengths
    assert evaluation["env_steps"] == pytest.approx(evaluation["episode_len_mean"] * evaluation["num_episodes"])


def test_evaluation_config_sets_the_evaluation_envs_config_and_exploration():
    config = {"env": "CartPole-v1", "seed": 0, **TRAINERS["PPO"][2], "evaluation_interval": 1,
              "evaluation_duration": 4}
    short = PPO(config={**config, "evaluation_config": {"env_config": {"max_episode_steps": 5}}})
    explore = PPO(config={**config, "evaluation_config": {"explore": True}})
    greedy = PPO(config=config)
    try:
        evaluation = short.train()["evaluation"]
        assert evaluation["episode_len_mean"] <= 5 and evaluation["num_episodes"] == 4
        sampled, deterministic = explore.train()["evaluation"], greedy.train()["evaluation"]
        assert sampled["num_episodes"] == deterministic["num_episodes"] == 4
        assert sampled["episode_return_mean"] != deterministic["episode_return_mean"]
    finally:
        for trainer in (short, explore, greedy):
            trainer.stop()


def sized_env(config):
    return gym.make("CartPole-v1") if config.get("size", 4) == 4 else _Sized(config["size"])


class _Sized(gym.Env):
    def __init__(self, size: int) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(2)


def test_an_evaluation_env_config_with_other_spaces_is_one_error_naming_it():
    register_env("eval-sized", sized_env)
    with pytest.raises(ValueError, match="config key 'evaluation_config.env_config': the env it makes has other "
                                         "observation or action spaces"):
        PPO.prepare_trial({"env": "eval-sized", "evaluation_interval": 1,
                           "evaluation_config": {"env_config": {"size": 3}}})


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("name", ["PPO", "SAC", "TD3"])
def test_evaluation_actors_play_the_same_episodes_as_the_learners_process(name, tmp_path):
    cls, env, small = TRAINERS[name]
    config = {"env": env, "seed": 5, "num_envs_per_worker": 2, **small, "evaluation_interval": 1,
              "evaluation_duration": 5}
    local, remote = cls(config=config), cls(config={**config, "evaluation_num_workers": 2, "num_workers": 1})
    try:
        remote.restore(local.save(str(tmp_path / "same")))  # the same weights in both
        remote.last_evaluation = local.last_evaluation = None
        weights = local.policy.get_weights
        a = local.evaluator.evaluate(weights)
        b = remote.evaluator.evaluate(weights)
        assert len(remote.evaluator._actors) == 2  # noqa: SLF001 - the evaluation ran on two actors
        assert (a["num_episodes"], a["env_steps"]) == (b["num_episodes"], b["env_steps"]) == (5, b["env_steps"])
        assert a["episode_return_mean"] == pytest.approx(b["episode_return_mean"], rel=1e-4)
    finally:
        local.stop()
        remote.stop()
