"""tune.Tuner on the tune.run engine: callbacks, trial names, fail_fast, get_context in class
Trainables, and Tuner.restore of failed trials (resumed or restarted)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import pytest

from tuner import tune
from tuner.execution.progress import ProgressReporter
from tuner.tensorboard.exporter import TensorBoardExporter

pytestmark = pytest.mark.usefixtures("ray_session")

STEPS = 6


def steps_with_checkpoints(config):
    """Reports STEPS steps, a checkpoint every other step; fails at step 4 while ``config["fail"]``
    names a file that does not exist yet (``"once"``: it creates it, so the retry goes through). A
    retry goes on from the step-2 checkpoint: step 3 runs again (its result is a replay)."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        start = json.loads(Path(checkpoint.path, "step.json").read_text()) + 1
    for step in range(start, STEPS):
        marker = config.get("fail")
        if step == 4 and marker and not os.path.exists(marker):
            if config.get("once"):
                Path(marker).touch()
            raise RuntimeError(f"step 4 failed (trial {tune.get_context().get_trial_id()})")
        if step % 2:
            tune.report({"score": config["x"] * step, "start": start})
            continue
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step.json").write_text(json.dumps(step))
            tune.report({"score": config["x"] * step, "start": start}, checkpoint=tune.Checkpoint.from_directory(d))


class Recorder(tune.Callback):
    def __init__(self):
        self.results: dict[str, list[int]] = {}
        self.checkpoints: dict[str, list[str]] = {}
        self.events: list[tuple] = []

    def setup(self, **info):
        self.events.append(("setup", info["experiment_name"]))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.results.setdefault(trial.trial_id, []).append(result["training_iteration"])

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        self.checkpoints.setdefault(trial.trial_id, []).append(checkpoint.path)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.events.append(("complete", trial.trial_id))

    def on_trial_error(self, iteration, trials, trial, **info):
        self.events.append(("error", trial.trial_id))

    def on_experiment_end(self, trials, **info):
        self.events.append(("end", len(trials)))


class BrokenLogger(tune.Callback):
    def on_trial_result(self, iteration, trials, trial, result, **info):
        raise ConnectionError("the tracking server is down")

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        raise ConnectionError("the tracking server is down")


def test_callbacks_see_every_result_once_in_order_and_a_broken_one_costs_nothing(tmp_path, caplog, capsys):
    recorder = Recorder()
    with caplog.at_level(logging.ERROR, logger="tuner.callback"):
        grid = tune.Tuner(
            tune.with_resources(steps_with_checkpoints, {"cpu": 0.5}),
            param_space={"x": tune.grid_search([1, 2, 3]), "once": True,
                         "fail": tune.sample_from(lambda spec: str(tmp_path / "failed") if spec.config.x == 2 else "")},
            tune_config=tune.TuneConfig(metric="score", mode="max"),
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="cb", verbose=2, tensorboard=False,
                                      callbacks=[BrokenLogger(), recorder],
                                      failure_config=tune.FailureConfig(max_failures=1)),
        ).fit()
    analysis = grid.analysis
    ids = [r.trial_id for r in grid]
    # Every result exactly once, in order, per trial: the retried trial's replayed steps included.
    assert sorted(recorder.results) == sorted(ids)
    assert all(recorder.results[i] == list(range(1, STEPS + 1)) for i in ids)
    retried = next(r for r in grid if r.config["x"] == 2)
    assert analysis.trials[ids.index(retried.trial_id)].num_failures == 1
    assert list(retried.metrics_dataframe["start"]) == [0, 0, 0, 0, 3, 3]  # went on from its checkpoint
    # on_checkpoint once per checkpoint registered, as the store recorded them.
    for trial_id in ids:
        assert recorder.checkpoints[trial_id] == [c["path"] for c in analysis.checkpoints(trial_id)]
    assert recorder.events[0] == ("setup", "cb") and recorder.events[-1] == ("end", 3)
    assert sorted(e[1] for e in recorder.events if e[0] == "complete") == sorted(ids)
    assert not [e for e in recorder.events if e[0] == "error"]  # the retry succeeded
    # The broken logger is named once per hook, and every result is stored all the same.
    messages = [r.getMessage() for r in caplog.records]
    for hook in ("on_trial_result", "on_checkpoint"):
        assert sum("BrokenLogger" in m and hook in m for m in messages) == 1, messages
    assert len(analysis.results_df) == 3 * STEPS
    # The progress output is a callback of the same kind (verbose=2: each trial's end).
    assert issubclass(ProgressReporter, tune.Callback) and issubclass(TensorBoardExporter, tune.Callback)
    assert capsys.readouterr().out.count(f"TERMINATED after {STEPS} iterations") == 3
    analysis.close()


class Named(tune.Trainable):
    def setup(self, config):
        context = tune.get_context()
        self.seen = {"name": context.get_trial_name(), "dir": context.get_trial_dir(), "id": context.get_trial_id()}

    def step(self):
        return {**self.seen, "done": True}


def test_trial_names_directories_and_get_context_in_a_class_trainable(tmp_path):
    grid = tune.Tuner(
        tune.with_resources(Named, {"cpu": 0.5}),
        param_space={"lr": tune.grid_search([0.1, 0.2])},
        tune_config=tune.TuneConfig(
            trial_name_creator=lambda trial: f"lr={trial.config['lr']}",
            trial_dirname_creator=lambda trial: f"trial_{trial.index}",
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="named", verbose=0, tensorboard=False),
    ).fit()
    assert [r.metrics["name"] for r in grid] == ["lr=0.1", "lr=0.2"]
    assert [r.path for r in grid] == [str(tmp_path / "named" / f"trial_{i}") for i in range(2)]
    assert [r.metrics["dir"] for r in grid] == [r.path for r in grid]
    assert [r.metrics["id"] for r in grid] == [r.trial_id for r in grid]
    grid.analysis.close()


def test_fail_fast_stops_the_sweep_at_the_first_failure(tmp_path):
    marker = str(tmp_path / "never")
    grid = tune.Tuner(
        steps_with_checkpoints,
        param_space={"x": tune.grid_search([1, 2, 3]), "fail": marker},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="ff", verbose=0, tensorboard=False,
                                  failure_config=tune.FailureConfig(fail_fast=True)),
    ).fit()
    assert grid.num_errors == 1 and "step 4 failed" in str(grid.errors[0])
    assert [len(r.metrics_dataframe) for r in grid] == [4]  # the other trials never started
    grid.analysis.close()
    with pytest.raises(tune.TuneError, match=r"failed \(fail_fast='raise'\):\n(.|\n)*step 4 failed"):
        tune.run(steps_with_checkpoints, config={"x": 1, "fail": marker}, fail_fast="raise",
                 raise_on_failed_trial=False, storage_path=str(tmp_path), name="ff_raise", verbose=0,
                 tensorboard=False)


@pytest.mark.parametrize("how", ["resume_errored", "restart_errored"])
def test_restore_retries_failed_trials(tmp_path, how):
    marker = tmp_path / "fixed"
    tuner = tune.Tuner(
        tune.with_resources(steps_with_checkpoints, {"cpu": 0.5}),
        param_space={"x": tune.grid_search([1, 2]), "fail": tune.sample_from(lambda spec: str(marker) if spec.config.x == 2 else "")},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="flaky", verbose=0, tensorboard=False,
                                  checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
    )
    first = tuner.fit()
    assert first.num_errors == 1 and len(first[1].metrics_dataframe) == 4
    old_checkpoint = first[1].checkpoint.path
    first.analysis.close()
    path = str(tmp_path / "flaky")
    assert tune.Tuner.can_restore(path) and not tune.Tuner.can_restore(tmp_path / "nothing")
    marker.touch()  # the cause of the failure is fixed
    grid = tune.Tuner.restore(path, trainable=tune.with_resources(steps_with_checkpoints, {"cpu": 0.5}),
                              **{how: True}).fit()
    assert (grid.num_terminated, grid.num_errors) == (2, 0)
    done, retried = grid
    assert list(done.metrics_dataframe["training_iteration"]) == list(range(1, STEPS + 1))  # not run again
    assert list(retried.metrics_dataframe["training_iteration"]) == list(range(1, STEPS + 1))
    if how == "resume_errored":  # from its last checkpoint (step 2)
        assert list(retried.metrics_dataframe["start"]) == [0, 0, 0, 0, 3, 3]
    else:  # from scratch: the old results and checkpoints are gone
        assert list(retried.metrics_dataframe["start"]) == [0] * STEPS
    records = grid.analysis.checkpoints(retried.trial_id, include_deleted=True)
    assert [Path(r["path"]).name for r in records if not r["deleted"]] == ["checkpoint_000005"]  # num_to_keep=1
    assert retried.checkpoint.path != old_checkpoint and not os.path.exists(old_checkpoint)
    grid.analysis.close()


def test_restore_needs_a_tuner_sweep(tmp_path):
    tune.run(steps_with_checkpoints, config={"x": 1}, storage_path=str(tmp_path), name="plain", verbose=0,
             tensorboard=False, resources_per_trial={"cpu": 0.5})
    assert not tune.Tuner.can_restore(tmp_path / "plain")
    with pytest.raises(ValueError, match=r"no sweep run by Tuner.fit .* resume=True"):
        tune.Tuner.restore(str(tmp_path / "plain"), trainable=steps_with_checkpoints)


@pytest.mark.parametrize("name", ["..", ".", "../escaped"])
def test_a_name_outside_the_storage_path_is_refused_by_fit_and_nothing_is_written(tmp_path, name):
    run_config = tune.RunConfig(storage_path=str(tmp_path / "storage"))
    run_config.name = name  # past RunConfig's own check, which fit makes again
    with pytest.raises(ValueError, match=r"^(RunConfig\.)?name must be letters, digits"):
        tune.Tuner(steps_with_checkpoints, param_space={"x": 1}, run_config=run_config).fit()
    assert list(tmp_path.iterdir()) == []
