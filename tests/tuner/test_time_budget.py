"""A sweep cut by its time budget says how many trials did not run, is stored as INCOMPLETE, and a
resume runs them (each run under a fresh budget, as in Ray Tune)."""

from __future__ import annotations

import logging
import os
import time

import pytest

from tuner import tune
from tuner.store import Store, default_database_url

pytestmark = pytest.mark.usefixtures("ray_session")

GRID = {"a": tune.grid_search([0, 1, 2, 3]), "b": tune.grid_search([0, 1, 2])}


def held(config):
    """Reports once, then waits (two minutes at most) for the test's release file."""
    tune.report({"score": config["a"] * 10 + config["b"]})
    deadline = time.monotonic() + 120
    while not os.path.exists(config["release"]) and time.monotonic() < deadline:
        time.sleep(0.02)


def _status(run_dir, database_url):
    """The sweep's status as the store holds it."""
    store = Store(database_url or default_database_url(run_dir), create=False)
    try:
        return store.get_experiment(run_dir.name)["status"]
    finally:
        store.close()


def held_first(config):
    """Waits (two minutes at most) for the test's release file, then reports once."""
    deadline = time.monotonic() + 120
    while not os.path.exists(config["release"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    tune.report({"score": config["a"] * 10 + config["b"]})


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request):
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.mark.parametrize("trainable", [held, held_first], ids=["report-then-hold", "hold-then-report"])
def test_a_budget_cut_grid_says_what_did_not_run_and_a_resume_runs_it(tmp_path, database_url, trainable, caplog):
    release = tmp_path / "release"
    kwargs = dict(config={**GRID, "release": str(release)}, metric="score", mode="max", storage_path=str(tmp_path),
                  name=f"cut_{trainable.__name__}", database_url=database_url, max_concurrent_trials=2, verbose=0)
    # No trial can end on its own before the release file exists: the budget cuts the sweep.
    with caplog.at_level(logging.WARNING, logger="tuner"):
        analysis = tune.run(trainable, time_budget_s=1, **kwargs)
    ran = [t for t in analysis.trials if t.status == "TERMINATED"]
    cut = analysis.budget_cut
    assert cut is not None and cut.total == 12 and cut.not_run == 12 - len(ran) > 0
    # a trial cut before its first result did not run either: it waits for the resume, as pending ones do
    assert all(t.status == "PENDING" or t.status == "TERMINATED" and t.last_result for t in analysis.trials)
    if trainable is held_first:
        assert not ran and cut.not_run == 12
    assert _status(tmp_path / f"cut_{trainable.__name__}", database_url) == "INCOMPLETE"
    lines = [r.getMessage() for r in caplog.records if "time budget" in r.getMessage()]
    assert lines == [f"sweep cut_{trainable.__name__}: time budget of 1 s spent: {cut.not_run} of 12 trials did not run; the sweep is "
                     f"stored as INCOMPLETE, a resume (resume=True) runs the rest (with a fresh time budget)"]
    analysis.close()

    release.touch()
    analysis = tune.run(trainable, resume=True, **kwargs)  # no budget this time: it runs to the end
    assert sorted((t.config["a"], t.config["b"]) for t in analysis.trials) == [(a, b) for a in range(4) for b in range(3)]
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    assert analysis.budget_cut is None and _status(tmp_path / f"cut_{trainable.__name__}", database_url) == "TERMINATED"
    analysis.close()


def test_a_budget_that_cuts_no_trial_leaves_the_sweep_terminated(tmp_path):
    def quick(config):
        tune.report({"score": config["a"]})

    analysis = tune.run(quick, config={"a": tune.grid_search([1, 2])}, time_budget_s=600, storage_path=str(tmp_path),
                        name="whole", verbose=0)
    assert analysis.budget_cut is None and _status(tmp_path / "whole", None) == "TERMINATED"
    analysis.close()
