"""A driver killed with SIGKILL mid-sweep; the sweep resumed from the store loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tests.tuner import resume_sweep
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


KILL_POINTS = {
    "trial-start": "SELECT COUNT(*) FROM trials",
    "mid-results": "SELECT COUNT(*) FROM results",
    "checkpoint": "SELECT COUNT(*) FROM trials WHERE checkpoint_path IS NOT NULL",
    "exploit": "SELECT COUNT(*) FROM exploits",
}


def _count(db: str, table: str) -> int:
    return _query(db, f"SELECT COUNT(*) FROM {table}")


def _query(db: str, sql: str) -> int:
    if not os.path.exists(db):
        return 0
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).scalar_one()
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def _driver(storage, name, scheduler, log):
    """The sweep in a driver process that joins this test session's Ray."""
    import ray

    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    with open(os.path.join(storage, f"{name}.stderr"), "w") as err:  # a file: a full pipe would block it
        return subprocess.Popen(
            [sys.executable, "-m", "tests.tuner.resume_sweep", storage, name, scheduler, log], cwd=ROOT, env=env,
            stderr=err,
        )


def _kill_when(storage, name, scheduler, log, sql, at_least, sig=signal.SIGKILL):
    """Run the sweep in a driver process; send it ``sig`` once ``sql`` counts enough. Returns the
    time of the signal and the driver's exit code and stderr."""
    proc = _driver(storage, name, scheduler, log)
    db = os.path.join(storage, name, "tuner.db")
    deadline = time.time() + 120
    try:
        while time.time() < deadline and proc.poll() is None:
            if _query(db, sql) >= at_least:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before the kill point"
    finally:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with open(os.path.join(storage, f"{name}.stderr")) as f:
        return time.time(), proc.returncode, f.read()


@pytest.fixture(scope="module")
def clean_best_x(tmp_path_factory):
    """The best config's x of the sweep run without interruption, by scheduler: run once per
    scheduler, the same for every kill point (same seed)."""
    best: dict[str, float] = {}

    def of(scheduler: str) -> float:
        if scheduler not in best:
            storage = tmp_path_factory.mktemp(f"clean_{scheduler}")
            best[scheduler] = resume_sweep.sweep(str(storage), "clean", scheduler, str(storage / "clean.jsonl")).best_config["x"]
        return best[scheduler]

    return of


@pytest.mark.parametrize(
    "scheduler, kill_point, at_least",
    [
        ("fifo", "trial-start", 1),
        ("fifo", "mid-results", 20),
        ("fifo", "checkpoint", 2),
        ("asha", "trial-start", 1),
        ("asha", "mid-results", 20),
        ("pbt", "exploit", 1),
    ],
)
def test_sigkilled_driver_resumes_without_losing_or_repeating(tmp_path, clean_best_x, scheduler, kill_point, at_least):
    storage, log = str(tmp_path), str(tmp_path / "starts.jsonl")
    killed_at, _, _ = _kill_when(storage, "swept", scheduler, log, KILL_POINTS[kill_point], at_least)
    before = tune.load(tmp_path / "swept")
    done_before = {t.trial_id for t in before.trials if t.status == "TERMINATED"}
    rows_before = {(r["trial_id"], r["training_iteration"]): r["score"] for r in before.results_df.to_dict("records")} \
        if len(before.results_df) else {}
    before.close()
    assert len(rows_before) < 8 * resume_sweep.ITERATIONS, "the kill came after the sweep's work was done"

    analysis = resume_sweep.sweep(storage, "swept", scheduler, log, resume=True)
    trials = analysis.trials
    assert len(trials) == 8 and {t.status for t in trials} == {"TERMINATED"}
    df = analysis.results_df
    assert not df.duplicated(["trial_id", "training_iteration"]).any()
    for trial_id, frame in analysis.trial_dataframes.items():
        iterations = list(frame["training_iteration"])
        assert iterations == list(range(1, len(iterations) + 1)), trial_id  # no gap, no repeat
    # Every result committed before the kill is still there, unchanged.
    after = {(r["trial_id"], r["training_iteration"]): r["score"] for r in df.to_dict("records")}
    assert all(after[key] == value for key, value in rows_before.items())
    # No trial that had finished before the kill ran again.
    with open(log) as f:
        starts = [json.loads(line) for line in f]
    assert not [s for s in starts if s["trial"] in done_before and s["t"] > killed_at]
    resumed = [s for s in starts if s["t"] > killed_at]
    assert resumed, "nothing ran after the kill"
    if kill_point == "mid-results":  # trials interrupted mid-way went on from their checkpoints
        assert any(s["from"] > 0 for s in resumed)
    if scheduler == "pbt":  # the lineage recorded before the kill is still there, and goes on
        assert len(analysis.exploits) >= at_least
        return
    # The same best config as an uninterrupted sweep with the same seed.
    assert analysis.best_config["x"] == clean_best_x(scheduler)
    if scheduler == "fifo":
        assert all(len(f) == resume_sweep.ITERATIONS for f in analysis.trial_dataframes.values())


def test_sigterm_leaves_interrupted_trials_that_resume_finishes(tmp_path, clean_best_x):
    """SIGTERM (kill, docker stop, Slurm preemption) mid-sweep: the driver exits 143 without a
    traceback, running trials are on record as INTERRUPTED (never TERMINATED part-way), and a
    resume finishes every trial with each result stored once, to an uninterrupted run's best."""
    storage, log = str(tmp_path), str(tmp_path / "starts.jsonl")
    db = os.path.join(storage, "termed", "tuner.db")
    termed_at, code, err = _kill_when(storage, "termed", "fifo", log, KILL_POINTS["mid-results"], 20, signal.SIGTERM)
    assert code == 143, err
    assert "Traceback" not in err, err
    assert _query(db, "SELECT status FROM experiments") == "INTERRUPTED"
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        statuses = dict(conn.execute(sa.text("SELECT trial_id, status FROM trials")).all())
        counts = dict(conn.execute(sa.text("SELECT trial_id, COUNT(*) FROM results GROUP BY trial_id")).all())
    engine.dispose()
    assert "INTERRUPTED" in statuses.values() and "RUNNING" not in statuses.values(), statuses
    short = {t: counts.get(t, 0) for t, s in statuses.items() if s == "TERMINATED" and counts.get(t, 0) < 8}
    assert not short, f"trials stored as finished part-way: {short}"
    before = tune.load(tmp_path / "termed")
    rows_before = {(r["trial_id"], r["training_iteration"]): r["score"] for r in before.results_df.to_dict("records")}
    before.close()

    analysis = resume_sweep.sweep(storage, "termed", "fifo", log, resume=True)
    assert len(analysis.trials) == 8 and {t.status for t in analysis.trials} == {"TERMINATED"}
    df = analysis.results_df
    assert len(df) == 8 * resume_sweep.ITERATIONS and not df.duplicated(["trial_id", "training_iteration"]).any()
    after = {(r["trial_id"], r["training_iteration"]): r["score"] for r in df.to_dict("records")}
    assert all(after[key] == value for key, value in rows_before.items())
    with open(log) as f:
        resumed = [json.loads(line) for line in f if json.loads(line)["t"] > termed_at]
    assert any(s["from"] > 0 for s in resumed), "no interrupted trial went on from its checkpoint"
    assert analysis.best_config["x"] == clean_best_x("fifo")


def test_resume_arguments(tmp_path):
    with pytest.raises(ValueError, match="resume: there is no sweep named 'nothing'"):
        tune.run(resume_sweep.train, storage_path=str(tmp_path), name="nothing", resume=True, verbose=0)
    with pytest.raises(ValueError, match="resume must be one of"):
        tune.run(resume_sweep.train, storage_path=str(tmp_path), name="nothing", resume="yes", verbose=0)
    assert not (tmp_path / "nothing").exists()


def _pid_writer(config):
    """Writes its actor's pid, then counts up with a checkpoint per step; the first actor stops
    at 3 and waits for the test to kill it (see the test below)."""
    ckpt = tune.get_checkpoint()
    start = 0
    if ckpt is not None:
        with open(os.path.join(ckpt.path, "i.json")) as f:
            start = json.load(f)["i"] + 1
    with open(config["pids"], "a") as f:
        f.write(f"{os.getpid()} {start}\n")
    for i in range(start, 12):
        if start == 0 and i == 3:  # the first actor lives until the test kills it (at most 2 minutes)
            deadline = time.time() + 120
            while time.time() < deadline:
                time.sleep(0.05)
        d = os.path.join(tune.get_context().get_trial_dir(), f"tmp_{i}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "i.json"), "w") as f:
            json.dump({"i": i}, f)
        tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))


def test_trial_actor_sigkilled_restarts_from_its_checkpoint(tmp_path):
    import threading

    pids = tmp_path / "pids.txt"

    db = str(tmp_path / "killed" / "tuner.db")

    def killer():  # once the store holds a checkpoint of the trial, whatever the machine's load
        deadline = time.time() + 120
        while time.time() < deadline:
            if pids.exists() and pids.read_text().strip() and _query(db, KILL_POINTS["checkpoint"]) >= 1:
                pid = int(pids.read_text().split()[0])
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    analysis = tune.run(
        _pid_writer, config={"pids": str(pids)}, max_failures=1, storage_path=str(tmp_path), name="killed", verbose=0
    )
    thread.join()
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.num_failures == 1
    assert "died" in trial.error.lower() or "actor" in trial.error.lower()
    starts = [line.split() for line in pids.read_text().splitlines()]
    assert len(starts) == 2 and starts[0][0] != starts[1][0]  # a new actor process
    assert int(starts[1][1]) > 0  # it went on from a checkpoint, not from scratch
    assert list(analysis.trial_dataframes[trial.trial_id]["i"]) == list(range(12))


def test_a_second_driver_on_a_running_sweep_is_refused(tmp_path):
    storage, log = str(tmp_path), str(tmp_path / "starts.jsonl")
    proc = _driver(storage, "busy", "fifo", log)
    try:
        db = os.path.join(storage, "busy", "tuner.db")
        deadline = time.time() + 60
        while time.time() < deadline and _query(db, KILL_POINTS["trial-start"]) < 1:
            time.sleep(0.05)
        with pytest.raises(tune.TuneError, match="already being run by another driver"):
            resume_sweep.sweep(storage, "busy", "fifo", log, resume=True)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # Once that driver is gone, the sweep resumes at once (the OS dropped its lock).
    analysis = resume_sweep.sweep(storage, "busy", "fifo", log, resume=True)
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
