"""A reported result reaches the store within the batch window, whether or not another report follows.

In the trial actor itself (outside Ray), then end to end: a trial that reports and goes on computing
has its row in the store while it computes, and a trial that then dies or hangs does not take its
results with it.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tuner import tune
from tuner.execution.actor_requests import RESULT_BATCH_MAX, RESULT_BATCH_WINDOW_S
from tuner.execution.trial_actor import TrialActor
from tuner.trainable.context import TrialInfo
from tuner.trainable.function_trainable import wrap_function

#: How long a trial waits for the test to release it; it goes on after that (so a test fails
#: rather than hangs when the row it waits for never comes).
RELEASE_TIMEOUT_S = 60.0


def _wait_for_file(path: str, timeout: float = RELEASE_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.path.exists(path)


# -- the trial actor, outside Ray ------------------------------------------------------------------
def _run(actor: TrialActor, trainable_cls: type, config: dict) -> tuple[list[dict], float]:
    """The actor's first run() call of a trial, as the controller makes it; (results, seconds)."""
    info = TrialInfo("t_00000", "t_00000", tempfile.mkdtemp(), "exp")
    began = time.monotonic()
    reply = actor.run(RESULT_BATCH_MAX, RESULT_BATCH_WINDOW_S, trainable_cls=trainable_cls, config=config, info=info)
    assert reply.timing.step_s >= 0 and reply.timing.began > 0
    return _results(reply), time.monotonic() - began


def _results(reply) -> list[dict]:
    """The user's result dicts of a run reply: no control keys among them."""
    results = [r.result for r in reply.reports if r.result is not None]
    assert not any(k.startswith("_") for r in results for k in r), results
    return results


def _report_then_wait_for(config):
    tune.report({"step": 0})
    _wait_for_file(config["release"], timeout=10)
    tune.report({"step": 1})


def test_run_hands_on_a_report_while_the_function_still_computes(tmp_path):
    release = tmp_path / "release"
    actor = TrialActor()
    results, seconds = _run(actor, wrap_function(_report_then_wait_for), {"release": str(release)})
    assert [r["step"] for r in results] == [0]
    assert seconds < 5
    release.touch()
    assert [r["step"] for r in _results(actor.run(RESULT_BATCH_MAX, RESULT_BATCH_WINDOW_S))] == [1]
    actor.stop()


class _StepThenWait(tune.Trainable):
    def step(self):
        if self.iteration > 0:
            _wait_for_file(self.config["release"], timeout=10)
        return {"step": self.iteration}


def test_run_gives_a_class_trainables_result_without_starting_another_step(tmp_path):
    release = tmp_path / "release"
    actor = TrialActor()
    results, seconds = _run(actor, _StepThenWait, {"release": str(release)})
    assert [r["step"] for r in results] == [0]
    assert seconds < 5
    release.touch()
    assert [r["step"] for r in _results(actor.run(RESULT_BATCH_MAX, RESULT_BATCH_WINDOW_S))] == [1]
    actor.stop()


# -- end to end: real Ray actors, the SQLite store ------------------------------------------------------
class _Watcher:
    """Creates ``release`` once the sweep's store holds ``rows`` result rows (watching at most
    two minutes), and records whether it did."""

    def __init__(self, db: Path, release: Path, rows: int) -> None:
        self._db, self._release, self._rows = db, release, rows
        self.released = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _count(self) -> int:
        engine = sa.create_engine(f"sqlite:///{self._db}")
        try:
            with engine.connect() as conn:
                return conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar_one()
        except sa.exc.OperationalError:  # not created yet
            return 0
        finally:
            engine.dispose()

    def _watch(self) -> None:
        deadline = time.monotonic() + 2 * RELEASE_TIMEOUT_S
        while not self._done.is_set() and time.monotonic() < deadline:
            if self._db.exists() and self._count() >= self._rows:
                self._release.touch()
                self.released.set()
                return
            time.sleep(0.02)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _sweep(tmp_path, trainable, rows, **kwargs):
    """Run a one-trial sweep while a watcher releases the trial once ``rows`` rows are stored."""
    release = tmp_path / "release"
    watcher = _Watcher(tmp_path / "sweep" / "tuner.db", release, rows)
    try:
        analysis = tune.run(
            trainable, config={"release": str(release)}, storage_path=str(tmp_path), name="sweep",
            verbose=0, tensorboard=False, **kwargs,
        )
    finally:
        watcher.stop()
    return analysis, watcher


def report_then_compute(config):
    tune.report({"step": 0})
    tune.report({"step": 1, "released": _wait_for_file(config["release"])})


class ReportThenCompute(tune.Trainable):
    def step(self):
        if self.iteration == 0:
            return {"step": 0}
        return {"step": 1, "released": _wait_for_file(self.config["release"]), "done": True}


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("trainable", [report_then_compute, ReportThenCompute], ids=["function", "class"])
def test_a_result_is_stored_while_the_trial_computes_its_next(tmp_path, trainable):
    analysis, watcher = _sweep(tmp_path, trainable, rows=1)
    (trial,) = analysis.trials
    assert watcher.released.is_set()
    assert trial.status == "TERMINATED"
    assert trial.last_result["released"] is True  # the first row was in the store before it went on
    assert list(analysis.results_df["step"]) == [0, 1]


def report_twice_then_die(config):
    tune.report({"step": 0})
    tune.report({"step": 1})
    _wait_for_file(config["release"])
    os._exit(1)


@pytest.mark.usefixtures("ray_session")
def test_results_reported_before_the_trial_process_dies_are_stored(tmp_path):
    analysis, watcher = _sweep(tmp_path, report_twice_then_die, rows=2, max_failures=0, raise_on_failed_trial=False)
    (trial,) = analysis.trials
    assert trial.status == "ERROR"
    assert list(analysis.results_df["step"]) == [0, 1]


def report_then_hang(config):
    tune.report({"step": 0})
    threading.Event().wait()


@pytest.mark.usefixtures("ray_session")
def test_a_report_followed_by_a_hang_is_stored_when_the_time_budget_ends_the_trial(tmp_path):
    analysis = tune.run(
        report_then_hang, time_budget_s=5, storage_path=str(tmp_path), name="hang", verbose=0, tensorboard=False,
    )
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED"
    assert list(analysis.results_df["step"]) == [0]
    assert trial.last_result["step"] == 0
