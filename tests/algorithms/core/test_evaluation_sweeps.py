"""The evaluation return as a sweep's metric: ranked on by every scheduler, stored, exported to
TensorBoard's HParams dashboard, shown by the CLI; asked for with evaluation off, refused before
anything is written."""

from __future__ import annotations

import re

import pytest

from schedulers import PB2, ASHAScheduler, HyperBandScheduler, MedianStoppingRule, PopulationBasedTraining
from tuner import tune
from tuner.cli import main
from tuner.tensorboard.reader import HParamsReader

pytestmark = pytest.mark.usefixtures("ray_session")

METRIC = "evaluation/episode_return_mean"
CONFIG = {"env": "CartPole-v1", "train_batch_size": 256, "minibatch_size": 128, "num_epochs": 2,
          "num_envs_per_worker": 4, "evaluation_interval": 2, "evaluation_duration": 3}


def _schedulers():
    mutations = {"lr": [1e-4, 1e-3, 3e-3]}
    return {
        "asha": ASHAScheduler(grace_period=1, max_t=4, reduction_factor=2),
        "hyperband": HyperBandScheduler(max_t=4, reduction_factor=2),
        "median": MedianStoppingRule(grace_period=1, min_samples_required=2),
        "pbt": PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
                                       hyperparam_mutations=mutations, seed=0, synch=True),
        "pb2": PB2(time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
                   hyperparam_bounds={"lr": [1e-4, 3e-3]}, seed=0, synch=True),
    }


@pytest.mark.parametrize("name", list(_schedulers()))
def test_every_scheduler_ranks_trials_on_the_evaluation_return(tmp_path, name):
    scheduler = _schedulers()[name]
    # PBT and PB2: a checkpoint every iteration, so a donor always has one to give, however the
    # trials' pauses interleave on a loaded machine
    analysis = tune.run("PPO", config={**CONFIG, "seed": tune.grid_search([0, 1, 2]),
                                       "lr": tune.grid_search([1e-3])},
                        scheduler=scheduler, metric=METRIC, mode="max", stop={"training_iteration": 4},
                        checkpoint_freq=1 if name in ("pbt", "pb2") else 0,
                        storage_path=str(tmp_path), name=name, verbose=0)
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    for trial in analysis.trials:
        last = trial.last_result["training_iteration"]  # the first iteration evaluates, then every second
        assert trial.last_result["evaluation"]["iteration"] == max([1] + list(range(2, last + 1, 2)))
    if name in ("pbt", "pb2"):  # synchronous: the worst of three exploits the best at iterations 2
        assert analysis.exploits
    frame = analysis.results_df
    assert frame[METRIC].notna().all()  # every result carries the latest evaluation
    best = analysis.get_best_trial(METRIC, "max", scope="last")
    assert best is not None
    assert best.last_result["evaluation"]["episode_return_mean"] == frame[METRIC].groupby(
        frame["trial_id"]).last().max()
    analysis.close()


def test_the_evaluation_return_is_stored_exported_and_shown(tmp_path, capsys):
    tune.run("PPO", config={**CONFIG, "seed": tune.grid_search([0, 1])}, metric=METRIC, mode="max",
             stop={"training_iteration": 2}, storage_path=str(tmp_path), name="shown", verbose=2)
    ends = [line for line in capsys.readouterr().out.splitlines() if "TERMINATED after 2 iterations" in line]
    assert len(ends) == 2 and all(re.search(rf"{METRIC}=-?\d", line) for line in ends), ends  # the nested key's value
    experiment = HParamsReader(str(tmp_path / "shown" / "tensorboard")).experiment()
    metrics = [m["name"]["tag"] for m in experiment["metricInfos"]]
    assert metrics[0] == METRIC and "evaluation/episode_len_mean" in metrics
    loaded = tune.load(tmp_path / "shown")
    stored = loaded.results_df
    assert {METRIC, "evaluation/num_episodes", "evaluation/episode_return_std"} <= set(stored.columns)
    assert (stored["evaluation/num_episodes"] == 3).all()
    loaded.close()
    capsys.readouterr()
    assert main(["show", "shown", "--storage-path", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert METRIC in shown
    assert main(["best", "shown", "--storage-path", str(tmp_path)]) == 0
    assert METRIC in capsys.readouterr().out


def test_an_evaluation_metric_with_evaluation_off_is_refused_before_anything_is_written(tmp_path):
    config = {key: value for key, value in CONFIG.items() if not key.startswith("evaluation")}
    with pytest.raises(ValueError, match="metric 'evaluation/episode_return_mean': PPO reports evaluation/... keys "
                                         "only with evaluation on; set config key 'evaluation_interval'"):
        tune.run("PPO", config=config, metric=METRIC, mode="max", stop={"training_iteration": 1},
                 storage_path=str(tmp_path), name="refused", verbose=0)
    assert not (tmp_path / "refused").exists()


def test_a_spec_with_an_evaluation_metric_and_evaluation_off_fails_its_check(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("trainable: PPO\nmetric: evaluation/episode_return_mean\nmode: max\n"
                    "config:\n  env: CartPole-v1\nstop:\n  training_iteration: 1\n")
    assert main(["sweep", str(spec), "--set", f"storage_path={tmp_path / 'runs'}"]) == 2
    assert "spec key 'metric': metric 'evaluation/episode_return_mean': PPO reports evaluation/" in \
        capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_ppo_sweep_validated_on_held_out_seeds_by_its_evaluation_return(tmp_path):
    tune.run("PPO", config={**CONFIG, "lr": tune.grid_search([1e-4, 3e-3]), "seed": 0}, metric=METRIC, mode="max",
             stop={"training_iteration": 2}, storage_path=str(tmp_path), name="ppo", verbose=0).close()
    analysis = tune.load(tmp_path / "ppo")
    report = analysis.validate(top_k=2, seeds=2)
    assert report.complete and report.plan.metric == METRIC and report.plan.seeds == (10_000, 10_001)
    validation = tune.load(tmp_path / "ppo-validation")
    seeds = sorted(t.config["seed"] for t in validation.trials)
    assert seeds == [10_000, 10_000, 10_001, 10_001]
    for config in report.configs:  # the held-out score is each trial's final evaluation return
        trials = [t for t in validation.trials if t.config["lr"] == config.candidate.config["lr"]]
        assert sorted(config.scores) == sorted(t.last_result["evaluation"]["episode_return_mean"] for t in trials)
    assert analysis.get_best_config(by="validated") == report.best_config
    validation.close()
    analysis.close()
