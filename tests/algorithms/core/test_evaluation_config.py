"""The evaluation keys: checks that name the key, the settings they give, the metric check."""

from __future__ import annotations

import pytest

from algorithms import DQN, PPO, SAC
from algorithms.core.evaluation_config import EvaluationSettings

BASE = {"env": "CartPole-v1", "evaluation_interval": 2}


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("evaluation_interval", -1, "'evaluation_interval': must be None or an int >= 0"),
        ("evaluation_interval", 1.5, "'evaluation_interval'"),
        ("evaluation_interval", True, "'evaluation_interval'"),
        ("evaluation_duration", 0, "'evaluation_duration': must be an int >= 1"),
        ("evaluation_duration", "auto", "'evaluation_duration'"),
        ("evaluation_duration_unit", "steps", r"'evaluation_duration_unit': must be one of \['episodes', 'timesteps'\]"),
        ("evaluation_num_workers", -2, "'evaluation_num_workers': must be an int >= 0"),
        ("evaluation_config", [("explore", False)], "'evaluation_config': must be a dict"),
        ("evaluation_config", {"lr": 0.1}, r"unknown key 'lr'; allowed keys: \['explore', 'env_config', "),
        ("evaluation_config", {"explore": "no"}, "'evaluation_config.explore': must be True or False"),
        ("evaluation_config", {"env_config": 3}, "'evaluation_config.env_config': must be a dict"),
        ("evaluation_config", {"num_envs_per_worker": 0}, "'evaluation_config.num_envs_per_worker'"),
    ],
)
@pytest.mark.parametrize("trainer", [PPO, DQN, SAC], ids=lambda t: t.__name__)
def test_a_bad_evaluation_value_is_one_error_naming_its_key(trainer, key, value, match):
    env = "Pendulum-v1" if trainer is SAC else "CartPole-v1"
    with pytest.raises(ValueError, match=match):
        trainer.resolve_config({**BASE, "env": env, key: value})


def test_settings_follow_the_config():
    assert EvaluationSettings.of(PPO.resolve_config({"env": "CartPole-v1"})) is None
    assert EvaluationSettings.of(PPO.resolve_config({"env": "CartPole-v1", "evaluation_interval": 0})) is None
    s = EvaluationSettings.of(PPO.resolve_config({**BASE, "evaluation_duration": 5, "evaluation_num_workers": 2}))
    assert s is not None
    assert (s.interval, s.duration, s.unit, s.num_workers, s.explore) == (2, 5, "episodes", 2, False)
    assert s.num_envs == 3  # no more envs than the episodes one actor plays
    t = EvaluationSettings.of(PPO.resolve_config({
        **BASE, "evaluation_duration": 500, "evaluation_duration_unit": "timesteps",
        "evaluation_config": {"explore": True, "env_config": {"max_episode_steps": 20}, "num_envs_per_worker": 2}}))
    assert t is not None and (t.explore, dict(t.env_config), t.num_envs) == (True, {"max_episode_steps": 20}, 2)


def test_the_first_iteration_evaluates_then_every_interval():
    s = EvaluationSettings.of(PPO.resolve_config({**BASE, "evaluation_interval": 3}))
    assert s is not None
    due = [s.due(i, evaluated=i > 1) for i in range(1, 8)]
    assert due == [True, False, True, False, False, True, False]


def test_evaluation_actors_take_bundles_of_the_trials_group():
    config = {**BASE, "num_workers": 2, "num_cpus_per_worker": 0.5, "evaluation_num_workers": 3}
    bundles = PPO.default_resource_request(config)
    assert bundles == [{"CPU": 1.0}] + [{"CPU": 0.5}] * 5
    off = PPO.default_resource_request({**config, "evaluation_interval": None})
    assert len(off) == 3  # evaluation off: no bundle for its actors
    assert PPO.accepts_resources(config, bundles + [{"CPU": 0.5}])
    assert not PPO.accepts_resources(config, bundles[:4] + [{"CPU": 0.5, "GPU": 1.0}])


@pytest.mark.parametrize(
    "config, metric, match",
    [
        ({"env": "CartPole-v1"}, "evaluation/episode_return_mean",
         r"reports evaluation/\.\.\. keys only with evaluation on; set config key 'evaluation_interval' to an int "
         r">= 1 \(it is None\)"),
        ({**BASE, "evaluation_interval": 0}, "evaluation/episode_return_mean", r"\(it is 0\)"),
        (BASE, "evaluation/episode_reward_mean", r"an evaluation reports \['evaluation/episode_return_mean'"),
    ],
)
def test_an_evaluation_metric_needs_evaluation_on(config, metric, match):
    with pytest.raises(ValueError, match=match):
        PPO.check_metric(metric, config)


def test_training_metrics_and_evaluation_metrics_with_evaluation_on_pass():
    PPO.check_metric("episode_return_mean", {"env": "CartPole-v1"})
    PPO.check_metric("evaluation/episode_return_mean", BASE)
