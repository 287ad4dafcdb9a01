"""Every YAML spec in examples/ runs through `tuner sweep`, its budget cut with --set overrides."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tuner.cli import main

pytestmark = pytest.mark.usefixtures("ray_session")

SMALL_PPO = [
    "config.train_batch_size=256", "config.minibatch_size=128", "config.num_envs_per_worker=4",
    "config.num_epochs=2",
]
# spec -> (overrides, trials expected); the specs of one environment family each run one trial
# (its search space, scheduler and evaluation settings as shipped, its budget cut)
EXAMPLES = {
    "ppo_cartpole_asha.yaml": (
        [*SMALL_PPO, "num_samples=2", "scheduler.grace_period=256", "scheduler.max_t=768", "stop.env_steps_total=768"],
        2,
    ),
    "ppo_cartpole_pbt.yaml": (
        [*SMALL_PPO, "num_samples=2", "scheduler.perturbation_interval=512", "scheduler.quantile_fraction=0.5",
         "stop.env_steps_total=1024"],
        2,
    ),
    "grid_sweep.yaml": ([*SMALL_PPO, "config.lr={grid: [1e-3, 2.5e-3]}", "stop.env_steps_total=512"], 2),
    "function_sweep.yaml": (["num_samples=1"], 4),
    "minigrid_doorkey_ppo.yaml": (
        [*SMALL_PPO, "num_samples=1", "scheduler.grace_period=256", "scheduler.max_t=512", "stop.env_steps_total=512",
         "config.evaluation_interval=1", "config.evaluation_duration=1"],
        1,
    ),
    **{f"mujoco_{env}_ppo.yaml": (
        ["config.train_batch_size=256", "config.num_epochs=1", "num_samples=1", "scheduler.grace_period=256",
         "scheduler.max_t=512", "stop.env_steps_total=512", "config.evaluation_interval=1",
         "config.evaluation_duration=1"],
        1,
    ) for env in ("halfcheetah", "hopper")},
    "atari_breakout_ppo.yaml": (
        ["config.num_envs_per_worker=2", "config.train_batch_size=128", "config.minibatch_size=64",
         "config.num_epochs=1", "num_samples=1", "scheduler.grace_period=128", "scheduler.max_t=256",
         "stop.env_steps_total=256", "config.evaluation_interval=1", "config.evaluation_duration=1",
         "config.evaluation_config={explore: true, env_config: {max_num_frames_per_episode: 400}}"],
        1,
    ),
    "mujoco_hopper_sac.yaml": (
        ["config.hidden_sizes=[32, 32]", "config.learning_starts=100", "config.min_sample_timesteps_per_iteration=200",
         "num_samples=1", "scheduler.grace_period=200", "scheduler.max_t=400", "stop.env_steps_total=400",
         "config.evaluation_interval=1", "config.evaluation_duration=1"],
        1,
    ),
}


# spec -> the spec it copies but for its environment (run above; this one is checked, not run again),
# and the budget keys (dotted) it may set otherwise
SAME_BUT_THE_ENV: dict[str, tuple[str, tuple[str, ...]]] = {
    "atari_pong_ppo.yaml": ("atari_breakout_ppo.yaml", ()),
    "mujoco_halfcheetah_sac.yaml": (
        "mujoco_hopper_sac.yaml", ("scheduler.grace_period", "scheduler.max_t", "stop.env_steps_total")),
}


def _without(document: dict, dotted: tuple[str, ...]) -> dict:
    """``document`` (a spec's top level) less the dotted keys, ``config`` left out."""
    kept = {k: dict(v) if isinstance(v, dict) else v for k, v in document.items()
            if k not in ("name", "description", "config")}
    for key in dotted:
        section, name = key.split(".")
        kept[section].pop(name)
    return kept


def test_every_example_spec_is_covered():
    assert sorted(p.name for p in (ROOT / "examples").glob("*.yaml")) == sorted([*EXAMPLES, *SAME_BUT_THE_ENV])


@pytest.mark.parametrize("example", sorted(SAME_BUT_THE_ENV))
def test_an_example_that_swaps_the_env_of_a_run_one_is_that_one_with_a_valid_env(example):
    """Its settings are those of a spec run above (its budget may differ); its own env is one the
    trainer builds, with spaces of the kinds that spec's trainer and model take."""
    from algorithms.envs.registry import env_spaces, trial_env
    from tuner.cli import spec

    copied_name, budget = SAME_BUT_THE_ENV[example]
    own = spec.load(ROOT / "examples" / example)
    copied = spec.load(ROOT / "examples" / copied_name)
    own_config, copied_config = dict(own.document["config"]), dict(copied.document["config"])
    env = own_config.pop("env")
    copied_env = copied_config.pop("env")
    assert env != copied_env and own_config == copied_config
    assert _without(own.document, budget) == _without(copied.document, budget)
    built = trial_env(env, {}, own_config.get("preprocessing"))
    observations, actions = env_spaces(built, {})
    copied_observations, copied_actions = env_spaces(trial_env(copied_env, {}, own_config.get("preprocessing")), {})
    assert type(observations) is type(copied_observations) and type(actions) is type(copied_actions)
    assert (observations.dtype, len(observations.shape)) == (copied_observations.dtype, len(copied_observations.shape))


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_runs_with_a_reduced_budget(example, tmp_path, monkeypatch, capsys):
    overrides, n_trials = EXAMPLES[example]
    monkeypatch.chdir(ROOT)
    argv = ["sweep", str(ROOT / "examples" / example), "--name", "ex", "--progress", "plain",
            "--set", f"storage_path={tmp_path}"]
    for override in overrides:
        argv += ["--set", override]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"sweep ex: {n_trials} trials ({n_trials} TERMINATED)" in out
    assert "=- (" not in out, out  # the best trial's metric printed, also a nested one (evaluation/...)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'ex' / 'tuner.db'}")
    try:
        with engine.connect() as conn:
            statuses = conn.execute(sa.text("SELECT status FROM trials")).scalars().all()
            results = conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar_one()
    finally:
        engine.dispose()
    assert statuses == ["TERMINATED"] * n_trials and results >= n_trials
    assert (tmp_path / "ex" / "sweep.yaml").exists()
