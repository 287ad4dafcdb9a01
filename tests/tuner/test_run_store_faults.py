"""tune.run and tune.load on a database that is wrong or goes away: one clear error, at once, and
nothing left behind."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

from tests.conftest import POSTGRES_URL
from tuner import tune
from tuner.store import StoreError


def _train(config):
    for i in range(config.get("iterations", 1)):
        time.sleep(config.get("sleep", 0))
        tune.report({"score": i})


@pytest.mark.parametrize("url", ["mysq://u@h/db", "foo"])
def test_a_malformed_database_url_is_one_value_error_and_nothing_is_written(url, tmp_path):
    with pytest.raises(ValueError, match=r"^database_url: .*sqlite:///PATH"):
        tune.run(_train, storage_path=str(tmp_path / "results"), name="bad", database_url=url, verbose=0)
    with pytest.raises(ValueError, match=r"^database_url: "):
        tune.load(tmp_path / "results" / "bad", database_url=url)
    assert not (tmp_path / "results").exists()


def test_a_missing_postgres_database_is_one_store_error_and_nothing_is_written(tmp_path):
    url = sa.make_url(POSTGRES_URL).set(database="tuner_no_such_db_16", password="pw-never-shown-3")
    url = url.render_as_string(hide_password=False)
    for call in (
        lambda: tune.run(_train, storage_path=str(tmp_path / "results"), name="gone", database_url=url, verbose=0),
        lambda: tune.load(tmp_path / "results" / "gone", database_url=url),
    ):
        with pytest.raises(StoreError) as info:
            call()
        message = str(info.value)
        assert "cannot use the database" in message and 'database "tuner_no_such_db_16" does not exist' in message
        assert "\n" not in message and "pw-never-shown-3" not in message
    assert not (tmp_path / "results").exists()


def _results_in(db) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM results").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0
    finally:
        conn.close()


@pytest.mark.usefixtures("ray_session")
def test_a_database_removed_mid_sweep_fails_it_at_once_with_one_line(tmp_path):
    """The driver used to write on into the removed file for the rest of the sweep, then fail with
    "no such table" from a fresh empty file; now the next write after the loss fails the sweep."""
    db = tmp_path / "removed" / "tuner.db"
    removed_at: list[float] = []

    def remove_once_results_are_in() -> None:
        while _results_in(db) == 0:  # the first results are in the store
            time.sleep(0.02)
        db.unlink()
        removed_at.append(time.monotonic())

    remover = threading.Thread(target=remove_once_results_are_in, daemon=True)
    remover.start()
    with pytest.raises(StoreError) as info:  # the trials alone would run for 20 s
        tune.run(_train, config={"iterations": 400, "sleep": 0.05}, resources_per_trial={"cpu": 0.5},
                 storage_path=str(tmp_path), name="removed", verbose=0)
    failed_after = time.monotonic() - removed_at[0]
    assert str(info.value).endswith(f"the database file {db} was removed while in use; nothing since could be stored")
    assert failed_after < 5.0, failed_after
    assert not db.exists()  # no empty database made in its place


_FROZEN_SWEEP = """
import glob, os, subprocess, sys, threading, time
from tests.tuner.cli.cli_trainables import checkpointed
from tuner import tune
from tuner.store import StoreError
storage = sys.argv[1]
run_dir = os.path.join(storage, "frozen")

def freeze():
    while not glob.glob(os.path.join(run_dir, "*", "checkpoint_*")):
        time.sleep(0.02)
    subprocess.run(["chattr", "+i", *glob.glob(os.path.join(run_dir, "tuner.db*"))], check=True)
    os.sync()  # the mapped pages written back: their next write faults, as once the kernel writes them back itself

threading.Thread(target=freeze, daemon=True).start()
try:
    tune.run(checkpointed, config={"x": 1.0, "iterations": 300, "sleep": 0.05, "hold_after": -1},
             resources_per_trial={"cpu": 0.5},
             storage_path=storage, name="frozen", verbose=0)
except StoreError as exc:
    print("run:", exc)
try:
    tune.load(run_dir)  # what a user does next in the same session
    print("loaded")
except StoreError as exc:
    print("load:", exc)
"""


@pytest.mark.usefixtures("ray_session")
def test_a_sweep_whose_database_is_made_immutable_fails_with_one_error_and_nothing_crashes_after(tmp_path):
    """The driver's process lives on after its store failed: nothing in it may open the database
    again (SQLite would take locks in the protected shared-memory mapping: SIGBUS)."""
    import os
    import subprocess
    import sys

    import ray

    from tests.conftest import ROOT

    probe = tmp_path / "probe"
    probe.touch()
    if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a file immutable here")
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    storage = tmp_path / "results"
    try:
        done = subprocess.run([sys.executable, "-c", _FROZEN_SWEEP, str(storage)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=240)
    finally:
        subprocess.run(["chattr", "-i", *map(str, (storage / "frozen").glob("tuner.db*"))], check=False)
    db = storage / "frozen" / "tuner.db"
    assert done.returncode == 0, done.stdout + done.stderr
    why = f"cannot write {db}: it is immutable (chattr +i) or otherwise protected: Operation not permitted"
    assert f"run: tuner store sqlite:///{db}: {why}" in done.stdout, done.stdout + done.stderr
    assert f"load: the database {db} failed in this process ({why}" in done.stdout, done.stdout
    assert tune.load(storage / "frozen").trials  # another process reads what was stored
