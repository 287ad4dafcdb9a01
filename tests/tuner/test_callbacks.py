"""tune.Callback: every result once and in order; a failing callback costs nothing stored."""

from __future__ import annotations

import logging

import pytest

from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def counting(config):
    for i in range(5):
        tune.report({"score": config["x"] + i})


class Recorder(tune.Callback):
    def __init__(self):
        self.events = []
        self.results = {}

    def setup(self, **info):
        self.events.append(("setup", info["experiment_name"], info["metric"]))

    def on_trial_start(self, iteration, trials, trial, **info):
        self.events.append(("start", trial.trial_id))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.results.setdefault(trial.trial_id, []).append(result["training_iteration"])

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.events.append(("complete", trial.trial_id))

    def on_experiment_end(self, trials, **info):
        self.events.append(("end", len(trials)))


class Broken(tune.Callback):
    def on_trial_result(self, iteration, trials, trial, result, **info):
        raise RuntimeError("logger is down")


def test_callbacks_see_every_result_once_in_order(tmp_path, caplog):
    recorder = Recorder()
    with caplog.at_level(logging.ERROR, logger="tuner.callback"):
        analysis = tune.run(
            counting, config={"x": tune.grid_search([0, 10, 20])}, metric="score", mode="max",
            resources_per_trial={"cpu": 0.5}, callbacks=[Broken(), recorder],
            storage_path=str(tmp_path), name="cb", verbose=0,
        )
    ids = sorted(t.trial_id for t in analysis.trials)
    assert sorted(recorder.results) == ids
    assert all(seq == [1, 2, 3, 4, 5] for seq in recorder.results.values())
    assert recorder.events[0] == ("setup", "cb", "score") and recorder.events[-1] == ("end", 3)
    assert sorted(e[1] for e in recorder.events if e[0] == "start") == ids
    assert sorted(e[1] for e in recorder.events if e[0] == "complete") == ids
    # The broken callback is named once, and every result is in the store all the same.
    messages = [r.getMessage() for r in caplog.records]
    assert sum("Broken" in m and "on_trial_result" in m for m in messages) == 1
    assert len(analysis.results_df) == 15


def test_callbacks_must_be_callbacks(tmp_path):
    with pytest.raises(ValueError, match="callbacks: each callback must be a tune.Callback"):
        tune.run(counting, config={"x": 1}, callbacks=[print], storage_path=str(tmp_path), verbose=0)
    assert not any(tmp_path.iterdir())
