"""One driver per sweep, wherever the sweep is stored: PostgreSQL (advisory lock) and a SQLite file
(a lock file beside it), whatever the drivers' storage paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tuner.errors import SweepBusyError
from tuner.execution.sweep_lock import SweepLock

PASSWORD = "pw-never-shown-7"

HOLDER = """
import sys
from tuner.execution.sweep_lock import SweepLock
lock = SweepLock(sys.argv[1], sys.argv[2], sys.argv[3]).acquire()
print("locked", flush=True)
sys.stdin.read()  # held until the test kills this process
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


@pytest.fixture(params=["postgresql", "sqlite"])
def shared_url(request, tmp_path) -> str:
    """One database that two drivers with different storage paths share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared' / 'tuner.db'}"
    url = request.getfixturevalue("postgres_url")
    # trust auth ignores the password: it is there to show that no message carries it
    return sa.make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


def test_a_second_driver_is_refused_whatever_its_storage_path_and_a_killed_holder_frees_the_sweep(
    shared_url, tmp_path
):
    name = f"lock_{uuid.uuid4().hex[:8]}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, shared_url, name, str(tmp_path / "a" / name)],
        cwd=ROOT, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        elsewhere = tmp_path / "b" / name
        with pytest.raises(SweepBusyError, match="already being run by another driver") as info:
            SweepLock(shared_url, name, elsewhere).acquire()
        message = str(info.value)
        assert repr(name) in message and f"pid {holder.pid}" in message
        assert PASSWORD not in message
        assert not (tmp_path / "b").exists()  # the refused driver wrote nothing
        with SweepLock(shared_url, f"{name}_other", elsewhere):  # another sweep of that database is free
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died without a word: the server (or the OS) dropped its lock at once.
    with SweepLock(shared_url, name, tmp_path / "b" / name):
        pass


def test_the_sqlite_lock_lives_beside_the_database_file(tmp_path):
    db = tmp_path / "db" / "tuner.db"
    url = f"sqlite:///{db}"
    with SweepLock(url, "s", tmp_path / "runs" / "s"):
        assert [p.parent for p in db.parent.glob("tuner.db.*.lock")] == [db.parent]
        with pytest.raises(SweepBusyError, match=str(db)):
            SweepLock(url, "s", tmp_path / "other" / "s").acquire()
    with SweepLock(url, "s", tmp_path / "other" / "s"):  # released
        pass


@pytest.mark.parametrize("url", ["mysq://u@h/db", "foo"])
def test_a_malformed_url_is_a_value_error_before_any_lock(url, tmp_path):
    with pytest.raises(ValueError, match="database_url"):
        SweepLock(url, "s", tmp_path / "s")
    assert not any(tmp_path.iterdir())


DRIVER = """
import os, sys, time
from tuner import tune

def train(config):
    open(os.path.join(config["marks"], tune.get_context().get_trial_id()), "w").close()
    for i in range(3):
        tune.report({"score": config["x"] * (i + 1)})
        while not os.path.exists(config["release"]):  # the test lets the trials end
            time.sleep(0.02)

storage, url, name, marks, release = sys.argv[1:6]
tune.run(train, config={"x": tune.grid_search([1, 2]), "marks": marks, "release": release}, metric="score",
         mode="max", resources_per_trial={"cpu": 0.25}, storage_path=storage, database_url=url, name=name,
         verbose=0, resume="AUTO")
"""


@pytest.mark.usefixtures("ray_session")
def test_two_drivers_of_one_sweep_in_one_database_run_it_once(shared_url, tmp_path, ray_session):
    """Same name, same database, different storage paths, resume="AUTO" (what a launcher that
    retries does): the first runs the sweep, the second is refused before it writes anything."""
    name = f"twice_{uuid.uuid4().hex[:8]}"
    marks, release = tmp_path / "marks", tmp_path / "release"
    marks.mkdir()
    env = _env(RAY_ADDRESS=ray_session.get_runtime_context().gcs_address)

    def driver(storage: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(storage), shared_url, name, str(marks), str(release)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    first = driver(tmp_path / "a")
    try:
        while not any(marks.iterdir()):  # the first driver's trials run: it holds the sweep
            try:
                first.wait(0.05)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"the first driver ended before its trials ran: {first.communicate()}")
        second = driver(tmp_path / "b")
        out, err = second.communicate(timeout=120)
        assert second.returncode != 0, out + err
        assert "SweepBusyError" in err and "already being run by another driver" in err and repr(name) in err
        assert PASSWORD not in err
        assert not (tmp_path / "b").exists()
    finally:
        release.touch()
        out, err = first.communicate(timeout=180)
    assert first.returncode == 0, out + err

    from tuner import tune

    analysis = tune.load(tmp_path / "a" / name, database_url=shared_url)
    try:
        assert sorted(t.status for t in analysis.trials) == ["TERMINATED", "TERMINATED"]
        frame = analysis.results_df
        assert len(frame) == 6 and not frame.duplicated(["trial_id", "training_iteration"]).any()
        assert analysis.best_config["x"] == 2
    finally:
        analysis.close()
    engine = sa.create_engine(shared_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM experiments WHERE name = :n"), {"n": name}).scalar() == 1
    finally:
        engine.dispose()


def _end_lock_sessions(url: str, name: str) -> int:
    """End the database sessions that hold sweep ``name``'s advisory lock, as a server restart ends
    every session; how many were ended."""
    from tuner.execution.sweep_lock import advisory_key

    admin = sa.create_engine(url)
    try:
        with admin.begin() as conn:
            schema = conn.execute(sa.text("SELECT current_schema()")).scalar() or ""
            unsigned = advisory_key(schema, name) & 0xFFFFFFFFFFFFFFFF
            pids = [row[0] for row in conn.execute(sa.text(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
                "AND classid = CAST(:hi AS oid) AND objid = CAST(:lo AS oid)"),
                {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF})]
            for pid in pids:
                conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        return len(pids)
    finally:
        admin.dispose()


def test_a_lock_lost_with_its_session_is_taken_again_and_a_second_driver_still_refused(postgres_url, tmp_path):
    name = f"restart_{uuid.uuid4().hex[:6]}"
    lock = SweepLock(postgres_url, name, tmp_path / "a").acquire()
    try:
        assert _end_lock_sessions(postgres_url, name) == 1
        assert lock.keep() is None  # taken again, on a new session
        with pytest.raises(SweepBusyError):
            SweepLock(postgres_url, name, tmp_path / "b").acquire()
        # lost while a second driver took the sweep: this one is told who has it now
        assert _end_lock_sessions(postgres_url, name) == 1
        rival = SweepLock(postgres_url, name, tmp_path / "c").acquire()
        try:
            lost = lock.keep()
            assert lost is not None and "is already being run by another driver" in lost, lost
        finally:
            rival.release()
    finally:
        lock.release()


@pytest.mark.usefixtures("ray_session")
def test_a_sweep_whose_lock_session_ended_keeps_its_sweep(postgres_url, tmp_path, monkeypatch):
    """The driver's heartbeat takes the lock again: a second driver is refused after the session
    that held it ended (as at a server restart), while the first sweep runs on."""
    import threading
    import time

    from tuner import tune

    monkeypatch.setenv("TUNER_HEARTBEAT_S", "0.2")
    name = f"beat_{uuid.uuid4().hex[:6]}"
    outcome: list[object] = []

    def second_driver() -> None:
        deadline = time.monotonic() + 60
        while _end_lock_sessions(postgres_url, name) == 0:  # the sweep holds its lock
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)  # five heartbeats
        try:
            SweepLock(postgres_url, name, tmp_path / "other").acquire().release()
            outcome.append("taken")
        except SweepBusyError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=second_driver)
    thread.start()

    def slow(config):
        for i in range(60):
            time.sleep(0.05)
            tune.report({"score": float(i)})

    analysis = tune.run(slow, storage_path=str(tmp_path), name=name, database_url=postgres_url,
                        resources_per_trial={"cpu": 0.5}, verbose=0)
    thread.join()
    assert analysis.trials[0].status == "TERMINATED"
    assert len(outcome) == 1 and isinstance(outcome[0], SweepBusyError), outcome
    analysis.close()


def test_a_lock_whose_server_refuses_connections_is_kept_trying_and_released_quietly(tmp_path, own_postgres_database):
    """The session ended and the server refuses new ones (a database being dropped, a server
    shutting down): each heartbeat's check says nothing (tried again next time), and the release
    at the sweep's end raises nothing over the sweep's own error."""
    name, url, admin = own_postgres_database
    lock = SweepLock(url, "refused", tmp_path).acquire()
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
        conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"), {"n": name})
    assert lock.keep() is None  # its session is gone and a new one refused: tried again next time
    assert lock.keep() is None  # ... on the connection closed by the first try
    lock.release()
