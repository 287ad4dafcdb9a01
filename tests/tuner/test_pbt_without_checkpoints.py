"""PBT over a function trainable that never checkpoints: nothing to pause or exploit, no errors."""

from __future__ import annotations

import logging

import pytest

from schedulers import PopulationBasedTraining
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def train(config):
    for i in range(6):
        tune.report({"score": config["lr"] * (i + 1)})  # never a checkpoint


@pytest.mark.parametrize("synch", [False, True], ids=["async", "synch"])
def test_pbt_over_a_function_without_checkpoints_finishes_every_trial(tmp_path, caplog, synch):
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                        hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]}, synch=synch, seed=0)
    with caplog.at_level(logging.WARNING, logger="tuner.execution.controller"):
        analysis = tune.run(train, config={"lr": tune.grid_search([0.1, 0.2, 0.3, 0.4])}, num_samples=2, scheduler=scheduler,
                            max_concurrent_trials=2, metric="score", mode="max",
                            storage_path=str(tmp_path), name="pbt", verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 8
    assert all(t.last_result["training_iteration"] == 6 for t in analysis.trials)  # every result, none lost
    warnings = [r.getMessage() for r in caplog.records if "has reported no checkpoint" in r.getMessage()]
    assert len(warnings) <= 1, warnings  # once per sweep, when a pause or a checkpoint was asked for
