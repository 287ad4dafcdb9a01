"""A resume whose trial's latest checkpoint was deleted from disk: the trial goes on from its
newest checkpoint still on record and on disk, and the user is told which one went missing."""

from __future__ import annotations

import logging
import shutil

import pytest

from tests.tuner.cli.cli_trainables import fails_once
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def test_a_resume_falls_back_to_the_newest_checkpoint_left_and_says_which_went_missing(tmp_path, caplog):
    kwargs = dict(config={"fail_once": str(tmp_path / "failed")}, storage_path=str(tmp_path), name="gone",
                  resources_per_trial={"cpu": 0.5}, verbose=0, raise_on_failed_trial=False)
    first = tune.run(fails_once, **kwargs)
    trial = first.trials[0]
    assert trial.status == "ERROR"
    latest = trial.checkpoint.path
    assert latest.endswith("checkpoint_000003"), latest
    shutil.rmtree(latest)
    first.close()
    with caplog.at_level(logging.WARNING, logger="tuner.execution.resume"):
        again = tune.run(fails_once, resume="ERRORED_ONLY", **kwargs)
    trial = again.trials[0]
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["training_iteration"] == 6 and trial.last_result["resumed_from"] == 2
    previous = latest.replace("checkpoint_000003", "checkpoint_000002")
    said = [r.getMessage() for r in caplog.records if "is missing" in r.getMessage()]
    assert said == [f"trial fails_once_{trial.trial_id}: its latest checkpoint {latest} is missing; it goes on from "
                    f"{previous} (iteration 2), its newest checkpoint still there"], said
    again.close()
