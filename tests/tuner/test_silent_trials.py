"""A trainable that reports nothing ends TERMINATED, and one warning per sweep names such trials."""

from __future__ import annotations

import logging

import pytest

from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def sometimes_silent(config):
    if config["report"]:
        tune.report({"score": 1.0})
    # otherwise it returns without a word, as a function that forgot tune.report does


def test_trials_that_reported_nothing_are_named_in_one_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner"):
        analysis = tune.run(sometimes_silent, config={"report": tune.grid_search([False, True, False])},
                            metric="score", mode="max", storage_path=str(tmp_path), name="quiet", verbose=0)
    silent = sorted(t.trial_id for t in analysis.trials if not t.last_result)
    assert len(silent) == 2 and {t.status for t in analysis.trials} == {"TERMINATED"}
    lines = [r.getMessage() for r in caplog.records if "reported no result" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("sweep quiet: 2 trial(s) reported no result (a function trainable must call "
                               "tune.report): ")
    assert all(trial_id in lines[0] for trial_id in silent)
    analysis.close()


def test_no_warning_when_every_trial_reported(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner"):
        tune.run(sometimes_silent, config={"report": True}, storage_path=str(tmp_path), name="talks", verbose=0).close()
    assert not [r for r in caplog.records if "reported no result" in r.getMessage()]
