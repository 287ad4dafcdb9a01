"""A function trainable in its thread: one report per step, running ahead when allowed, waiting
for a report no later than a deadline; a generator function's yields are its reports."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tuner import tune
from tuner.trainable.checkpoint import Checkpoint
from tuner.trainable.function_trainable import wrap_function


def _make(func, config=None):
    return wrap_function(func)(dict(config or {}))


def _counting(reports=10):
    """A function that reports ``i`` for i in range(reports), and the list of reports it made."""
    made = []

    def train(config):
        for i in range(reports):
            made.append(i)
            tune.report({"i": i})

    return train, made


def _wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.005)
    return predicate()


def test_without_an_allowance_the_function_waits_in_each_report():
    train, made = _counting()
    trainable = _make(train)
    assert trainable.train()["i"] == 0
    time.sleep(0.1)
    assert made == [0]
    assert [trainable.train()["i"] for _ in range(3)] == [1, 2, 3]
    trainable.stop()


def test_an_allowance_lets_that_many_reports_queue_up_then_the_function_waits():
    train, made = _counting()
    trainable = _make(train)
    trainable.allow_run_ahead(3, time.monotonic() + 60)
    assert trainable.train()["i"] == 0
    assert _wait_for(lambda: len(made) == 4)
    time.sleep(0.1)
    assert made == [0, 1, 2, 3]  # three reports ran ahead; the fourth waits
    trainable.allow_run_ahead(0, 0.0)
    results = [trainable.train() for _ in range(6)]
    assert [r["i"] for r in results] == [1, 2, 3, 4, 5, 6]
    assert [r["training_iteration"] for r in results] == [2, 3, 4, 5, 6, 7]
    time.sleep(0.1)
    assert made == list(range(7))  # no allowance left: one report per step again
    trainable.stop()


def test_a_dict_the_function_reuses_is_reported_as_it_was_at_each_report():
    def train(config):
        metrics = {}
        for i in range(5):
            metrics["i"] = i
            tune.report(metrics)

    trainable = _make(train)
    trainable.allow_run_ahead(10, time.monotonic() + 60)
    first = trainable.train()
    time.sleep(0.1)  # the other reports are queued meanwhile
    assert [first["i"]] + [trainable.train()["i"] for _ in range(4)] == [0, 1, 2, 3, 4]


def test_the_allowance_ends_at_its_deadline():
    made = []

    def train(config):
        for i in range(10):
            made.append(i)
            time.sleep(0.05)
            tune.report({"i": i})

    trainable = _make(train)
    trainable.allow_run_ahead(100, time.monotonic() + 0.12)
    trainable.train()
    time.sleep(0.5)
    # At most the reports begun before the deadline (0.12 s at 0.05 s each, and the one that
    # ends the first step); a loaded machine makes fewer, never more: the later ones wait.
    assert 1 <= len(made) <= 4
    trainable.stop()


def test_a_checkpoint_or_done_is_never_run_past(tmp_path):
    made = []

    def train(config):
        for i in range(10):
            made.append(i)
            if i == 1:
                path = tmp_path / "ckpt"
                path.mkdir()
                tune.report({"i": i}, checkpoint=Checkpoint.from_directory(str(path)))
            else:
                tune.report({"i": i, "done": i == 3})

    trainable = _make(train)
    trainable.allow_run_ahead(100, time.monotonic() + 60)
    assert trainable.train()["i"] == 0
    assert _wait_for(lambda: len(made) == 2)
    time.sleep(0.1)
    assert made == [0, 1]
    assert "_checkpoint_path" in trainable.train()
    time.sleep(0.1)
    assert made == [0, 1]  # taking the checkpoint's result does not let the function on
    assert trainable.train()["i"] == 2
    assert _wait_for(lambda: len(made) == 4)
    time.sleep(0.1)
    assert made == [0, 1, 2, 3]  # report 3 says done: nothing after it runs
    trainable.stop()


def test_times_are_taken_at_the_report_even_when_the_result_is_taken_later():
    def train(config):
        for i in range(3):
            time.sleep(0.05)
            tune.report({"i": i})

    trainable = _make(train)
    trainable.allow_run_ahead(10, time.monotonic() + 60)
    first = trainable.train()
    time.sleep(1.0)  # the other reports are queued meanwhile
    later = [trainable.train() for _ in range(2)]
    for result in [first] + later:  # each from report to report: never the second spent queued
        assert 0.04 <= result["time_this_iter_s"] < 1.0
    assert later[-1]["timestamp"] < time.time() - 0.5
    assert trainable.train()["_finished"]


def test_stop_ends_a_function_that_runs_ahead():
    def train(config):
        while True:
            tune.report({"pid": os.getpid()})

    trainable = _make(train)
    trainable.allow_run_ahead(10**9, time.monotonic() + 60)
    trainable.train()
    thread = trainable._thread
    assert thread is not None and thread.is_alive()
    trainable.stop()
    assert not thread.is_alive()


def _report_then_wait(event):
    """A function that reports 0, waits for ``event`` (at most 10 s), then reports 1; and its reports."""
    made = []

    def train(config):
        made.append(0)
        tune.report({"i": 0})
        event.wait(timeout=10)
        made.append(1)
        tune.report({"i": 1})

    return train, made


def test_has_result_by_waits_no_later_than_its_deadline_then_takes_the_next_report():
    release = threading.Event()
    train, made = _report_then_wait(release)
    trainable = _make(train)
    trainable.allow_run_ahead(10, time.monotonic() + 60)
    assert trainable.train()["i"] == 0
    began = time.monotonic()
    assert not trainable.has_result_by(began + 0.05)  # the function computes: no report yet
    assert 0.05 <= time.monotonic() - began < 5
    release.set()
    assert trainable.has_result_by(time.monotonic() + 10)
    assert trainable.train()["i"] == 1
    assert trainable.has_result_by(time.monotonic() + 10)  # the function's return
    assert trainable.train()["_finished"]


def test_has_result_by_gives_a_queued_report_even_past_its_deadline():
    train, made = _counting(3)
    trainable = _make(train)
    trainable.allow_run_ahead(10, time.monotonic() + 60)
    assert trainable.train()["i"] == 0
    assert _wait_for(lambda: len(made) == 3)
    assert trainable.has_result_by(time.monotonic() - 1)
    assert trainable.train()["i"] == 1


def test_has_result_by_lets_a_waiting_function_on_only_before_its_deadline():
    train, made = _counting(5)
    trainable = _make(train)  # no allowance: the function waits in each report
    assert trainable.train()["i"] == 0
    assert not trainable.has_result_by(time.monotonic() - 1)
    time.sleep(0.1)
    assert made == [0]  # past the deadline: no new iteration started
    assert trainable.has_result_by(time.monotonic() + 10)
    assert made == [0, 1]
    assert trainable.train()["i"] == 1
    trainable.stop()


def test_each_dict_a_generator_function_yields_is_one_report():
    def train(config):
        for i in range(3):
            yield {"i": i * config["x"]}
        yield  # a bare yield reports nothing

    trainable = _make(train, {"x": 2})
    results = [trainable.train()]
    assert "_finished" not in results[0]
    results += [trainable.train() for _ in range(2)]
    assert [r["i"] for r in results] == [0, 2, 4]
    assert [r["training_iteration"] for r in results] == [1, 2, 3]
    assert trainable.train()["_finished"]


def test_a_generator_that_yields_no_dict_fails_the_trial_saying_what_to_yield():
    def train(config):
        yield {"i": 0}
        yield 0.5

    trainable = _make(train)
    assert trainable.train()["i"] == 0
    with pytest.raises(RuntimeError, match=r"must yield dicts of metrics .*got float: 0\.5"):
        trainable.train()


def test_stopping_a_generator_trial_runs_its_finally_blocks():
    closed = threading.Event()

    def train(config):
        try:
            while True:
                yield {"i": 0}
        finally:
            closed.set()

    trainable = _make(train)
    assert trainable.train()["i"] == 0
    trainable.stop()
    assert closed.is_set()


def yield_three(config):
    for i in range(3):
        yield {"score": i * config["x"]}


@pytest.mark.usefixtures("ray_session")
def test_a_sweep_of_a_generator_function_stores_what_it_yields(tmp_path):
    analysis = tune.run(
        yield_three, config={"x": tune.grid_search([1, 2])}, metric="score", mode="max",
        storage_path=str(tmp_path), name="gen", verbose=0, tensorboard=False,
    )
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    assert sorted(analysis.results_df["score"]) == [0, 0, 1, 2, 2, 4]
    assert analysis.best_config["x"] == 2


def test_a_dict_the_function_returns_is_its_last_report():
    def train(config):
        tune.report({"i": 0})
        return {"i": 1}

    trainable = _make(train)
    assert [trainable.train()["i"], trainable.train()["i"]] == [0, 1]
    assert trainable.train()["_finished"]


def test_an_async_function_is_refused_by_tune_run_before_anything_is_written(tmp_path):
    async def train(config):
        tune.report({"i": 0})

    with pytest.raises(ValueError, match="run_or_experiment: 'train' is an async function"):
        tune.run(train, storage_path=str(tmp_path), name="async", verbose=0)
    assert not (tmp_path / "async").exists()
