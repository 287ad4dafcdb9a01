"""A resume whose trial's latest checkpoint was deleted from disk: the trial goes on from its
newest checkpoint still on record and on disk, and the user is told which one went missing."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def flaky(config):
    """6 iterations with a checkpoint each, going on from its checkpoint; the first run fails at
    iteration 4 (the file ``marker`` says it did)."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"]
    for i in range(start + 1, 7):
        if i == 4 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("failed once")
        directory = os.path.join(tune.get_context().get_trial_dir(), f"state_{i}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"i": i}, f)
        tune.report({"score": float(i), "resumed_from": start}, checkpoint=tune.Checkpoint.from_directory(directory))


def test_a_resume_falls_back_to_the_newest_checkpoint_left_and_says_which_went_missing(tmp_path, caplog):
    kwargs = dict(config={"marker": str(tmp_path / "failed")}, storage_path=str(tmp_path), name="gone",
                  resources_per_trial={"cpu": 0.5}, verbose=0, raise_on_failed_trial=False)
    first = tune.run(flaky, **kwargs)
    trial = first.trials[0]
    assert trial.status == "ERROR"
    latest = trial.checkpoint.path
    assert latest.endswith("checkpoint_000003"), latest
    shutil.rmtree(latest)
    first.close()
    with caplog.at_level(logging.WARNING, logger="tuner.api"):
        again = tune.run(flaky, resume="ERRORED_ONLY", **kwargs)
    trial = again.trials[0]
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["training_iteration"] == 6 and trial.last_result["resumed_from"] == 2
    previous = latest.replace("checkpoint_000003", "checkpoint_000002")
    said = [r.getMessage() for r in caplog.records if "is missing" in r.getMessage()]
    assert said == [f"trial flaky_{trial.trial_id}: its latest checkpoint {latest} is missing; it goes on from "
                    f"{previous} (iteration 2), its newest checkpoint still there"], said
    again.close()
