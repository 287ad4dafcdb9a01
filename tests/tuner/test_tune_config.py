"""TuneConfig, RunConfig, CheckpointConfig, FailureConfig: Ray Tune's fields and defaults; a bad
field is one clear error naming it, raised before anything is written."""

from __future__ import annotations

import re

import pytest

from schedulers import ASHAScheduler
from tuner import tune
from tuner.tune_config import ConfigError, checkpoint_settings, default_sweep_name, is_sweep_name


def train(config):
    tune.report({"score": 1.0})


def test_defaults_are_ray_tunes():
    tc = tune.TuneConfig()
    assert (tc.metric, tc.mode, tc.num_samples, tc.max_concurrent_trials, tc.time_budget_s, tc.reuse_actors) == (
        None, None, 1, None, None, False)
    cc = tune.CheckpointConfig()
    assert (cc.num_to_keep, cc.checkpoint_score_attribute, cc.checkpoint_score_order, cc.checkpoint_frequency,
            cc.checkpoint_at_end) == (None, None, "max", 0, None)
    fc = tune.FailureConfig()
    assert (fc.max_failures, fc.fail_fast) == (0, False)
    rc = tune.RunConfig()
    assert rc.checkpoint_config == cc and rc.failure_config == fc
    assert (rc.name, rc.storage_path, rc.stop, rc.callbacks, rc.tensorboard) == (None, None, None, None, True)
    assert tune.TuneConfig(max_concurrent_trials=0).max_concurrent_trials is None  # 0: no limit, as in Ray Tune
    import datetime

    assert tune.TuneConfig(time_budget_s=datetime.timedelta(minutes=2)).time_budget_s == 120.0


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: tune.TuneConfig(metrc="loss"), "'metrc'"),
        (lambda: tune.RunConfig(storage="/tmp"), "'storage'"),
        (lambda: tune.CheckpointConfig(keep=2), "'keep'"),
        (lambda: tune.FailureConfig(retries=2), "'retries'"),
        (lambda: tune.CheckpointConfig(num_to_keep=0), "num_to_keep"),
        (lambda: tune.CheckpointConfig(num_to_keep=-1), "num_to_keep"),
        (lambda: tune.CheckpointConfig(num_to_keep=1.5), "num_to_keep"),
        (lambda: tune.CheckpointConfig(checkpoint_score_order="best"), "checkpoint_score_order"),
        (lambda: tune.CheckpointConfig(checkpoint_score_order=None), "checkpoint_score_order"),
        (lambda: tune.CheckpointConfig(checkpoint_frequency=-1), "checkpoint_frequency"),
        (lambda: tune.CheckpointConfig(checkpoint_score_attribute=3), "checkpoint_score_attribute"),
        (lambda: tune.FailureConfig(fail_fast="loud"), "fail_fast"),
        (lambda: tune.FailureConfig(fail_fast=True, max_failures=3), "fail_fast"),
        (lambda: tune.FailureConfig(max_failures=-2), "max_failures"),
        (lambda: tune.TuneConfig(mode="maximize"), "mode"),
        (lambda: tune.TuneConfig(num_samples=0), "num_samples"),
        (lambda: tune.TuneConfig(time_budget_s=-1), "time_budget_s"),
        (lambda: tune.TuneConfig(reuse_actors="yes"), "reuse_actors"),
        (lambda: tune.TuneConfig(pack_trials=0), "TuneConfig.pack_trials must be 'auto', False or an int >= 1"),
        (lambda: tune.TuneConfig(scheduler="asha"), "scheduler"),
        (lambda: tune.TuneConfig(trial_name_creator="name"), "trial_name_creator"),
        (lambda: tune.RunConfig(verbose=5), "verbose"),
        (lambda: tune.RunConfig(callbacks=[print]), "callbacks"),
        (lambda: tune.RunConfig(checkpoint_config={"num_to_keep": 2}), "checkpoint_config"),
        (lambda: tune.RunConfig(name="a/b"), "name"),
        (lambda: tune.RunConfig(name=".."), "RunConfig.name must be letters, digits"),
        (lambda: tune.RunConfig(name="."), "RunConfig.name must be letters, digits"),
        (lambda: tune.Tuner(train, tune_config=tune.RunConfig()), "tune_config"),
        (lambda: tune.Tuner(train, param_space=[1, 2]), "param_space"),
        (lambda: checkpoint_settings(None, keep_checkpoints_num=0), "keep_checkpoints_num"),
    ],
)
def test_a_bad_field_is_one_error_naming_it(make, field):
    with pytest.raises(ConfigError) as info:
        make()
    assert field in str(info.value)
    # One error that reads as either: Python (and Ray Tune) raise TypeError for an unknown keyword,
    # tune.run raises ValueError for every bad argument.
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_unknown_field_lists_the_allowed_ones():
    with pytest.raises(TypeError, match=r"TuneConfig: unknown field 'metrc'; the fields are \['mode', 'metric'"):
        tune.TuneConfig(metrc="loss")


def test_database_url_password_is_not_in_the_repr():
    rc = tune.RunConfig(database_url="postgresql+psycopg://user:s3cret@db/tuner")
    assert "s3cret" not in repr(rc)


def test_legacy_checkpoint_arguments_merge_as_in_ray_tune():
    merged = checkpoint_settings(tune.CheckpointConfig(num_to_keep=3, checkpoint_score_attribute="acc"),
                                 keep_checkpoints_num=2, checkpoint_score_attr="min-loss", checkpoint_freq=4)
    assert (merged.num_to_keep, merged.score_attribute, merged.score_order, merged.frequency) == (2, "loss", "min", 4)
    plain = checkpoint_settings(tune.CheckpointConfig(num_to_keep=3, checkpoint_score_attribute="acc",
                                                      checkpoint_at_end=True))
    assert (plain.num_to_keep, plain.score_attribute, plain.score_order, plain.at_end) == (3, "acc", "max", True)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tune_config": tune.TuneConfig(metric="score")}, "metric and mode go together"),
        ({"stop": "never"}, "stop"),  # set after construction, which refuses it
        ({"param_space": ["x"]}, "param_space"),
        ({"tune_config": tune.TuneConfig(search_alg="optuna")}, "search_alg"),
        ({"tune_config": tune.TuneConfig(metric="score", mode="max",
                                         scheduler=ASHAScheduler(metric="loss", mode="min"))}, "scheduler"),
    ],
)
def test_fit_checks_the_rest_before_writing_anything(tmp_path, kwargs, match):
    run_config = kwargs.pop("run_config", tune.RunConfig())
    run_config.storage_path, run_config.name = str(tmp_path), "never"
    if "stop" in kwargs:
        run_config.stop = kwargs.pop("stop")
    with pytest.raises(ValueError, match=match):
        tune.Tuner(train, run_config=run_config, **kwargs).fit()
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("trainable_name", ["train", "<lambda>", "__call__", "naïve", ""])
def test_a_default_sweep_name_is_a_valid_one(trainable_name):
    """Tuner.fit names a sweep after its trainable (a lambda too) with a name tune.run accepts."""
    name = default_sweep_name(trainable_name)
    assert is_sweep_name(name), name
    assert re.fullmatch(r"\w[\w.-]*_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", name), name


@pytest.mark.parametrize("stop, said", [
    (42, "RunConfig.stop must be a dict of thresholds, a callable (trial_id, result) -> bool, or a Stopper; got int"),
    ("x", "RunConfig.stop must be a dict of thresholds, a callable (trial_id, result) -> bool, or a Stopper; got str"),
    ({"env_steps_total": "many"}, "RunConfig.stop['env_steps_total'] must be a number, got 'many'"),
])
def test_a_bad_stop_is_refused_when_the_run_config_is_made(stop, said):
    with pytest.raises(ConfigError) as info:
        tune.RunConfig(stop=stop)
    assert str(info.value) == said
