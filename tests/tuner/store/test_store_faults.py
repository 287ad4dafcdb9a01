"""A store on a bad URL, an unreachable database, a corrupt file or a file removed while open: one
clear error each, and nothing written."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from tests.tuner.store.conftest import PG_URL
from tuner.store import Store, StoreError, default_database_url


@pytest.mark.parametrize("url", ["mysq://u@h/db", "foo", "", "oracle://u@h/db"])
def test_a_malformed_or_unknown_url_is_one_value_error(url):
    with pytest.raises(ValueError) as info:
        Store(url)
    message = str(info.value)
    assert message.startswith("database_url") and "sqlite:///PATH" in message and "postgresql+psycopg://" in message
    assert "\n" not in message


@pytest.mark.parametrize("where", ["no_such_database", "port_refused"])
def test_an_unreachable_postgres_is_one_store_error_without_the_password(where):
    url = sa.make_url(PG_URL).set(password="pw-never-shown-9")
    url = url.set(database="tuner_no_such_db_16") if where == "no_such_database" else url.set(port=1)
    with pytest.raises(StoreError) as info:
        Store(url.render_as_string(hide_password=False))
    message = str(info.value)
    assert message.startswith("cannot use the database postgresql+psycopg://postgres:***@")
    assert ("does not exist" if where == "no_such_database" else "refused") in message
    assert "\n" not in message and "pw-never-shown-9" not in message


def test_reading_a_missing_sqlite_file_creates_nothing(tmp_path):
    with pytest.raises(StoreError, match="no tuner database at .* does not exist"):
        Store(default_database_url(tmp_path / "missing"), create=False)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_sqlite_file_is_one_store_error(tmp_path, damage):
    url = default_database_url(tmp_path)
    with Store(url) as store:
        eid = store.get_or_create_experiment("e", spec={}, metric="m", mode="max")
        store.add_trial(eid, "t", 0, {"x": 1}, "RUNNING")
        store.add_results(eid, [("t", i, {"m": i, "pad": "x" * 400}) for i in range(200)])
    db = tmp_path / "tuner.db"
    if damage == "garbage":
        db.write_bytes(os.urandom(8192))
    else:
        with db.open("r+b") as f:
            f.truncate(db.stat().st_size // 2)
    with pytest.raises(StoreError) as info:
        store = Store(url, create=False)
        store.results(eid)  # a damaged page may only show when it is read
    assert str(info.value).startswith(f"{db} is not a tuner database, or it is corrupt (")


def test_a_corrupt_page_found_by_a_read_is_one_store_error(tmp_path):
    url = default_database_url(tmp_path)
    with Store(url) as store:
        eid = store.get_or_create_experiment("e", spec={}, metric="m", mode="max")
        store.add_trial(eid, "t", 0, {"x": 1}, "RUNNING")
        store.add_results(eid, [("t", i, {"m": i, "pad": "x" * 400}) for i in range(400)])
    db = tmp_path / "tuner.db"
    with db.open("r+b") as f:  # the results' pages, past the schema on the first ones
        f.seek(db.stat().st_size // 2)
        f.write(os.urandom(16 * 4096))
    store = Store(url, create=False)
    try:
        with pytest.raises(StoreError, match=r"is not a tuner database, or it is corrupt \(database disk image"):
            store.results(eid)
    finally:
        store.close()


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_database_file_removed_while_open_fails_the_store_at_once(tmp_path, how):
    """A connection would write on into the removed file (or a new one make an empty database)
    without a word: the store says so at its next pass, once; reads then fail, writes are dropped."""
    url = default_database_url(tmp_path)
    db = tmp_path / "tuner.db"
    store = Store(url)
    eid = store.get_or_create_experiment("e", spec={}, metric="m", mode="max")
    store.add_trial(eid, "t", 0, {"x": 1}, "RUNNING")
    store.add_result(eid, "t", 1, {"m": 1})
    store.flush()
    if how == "removed":
        db.unlink()
    else:
        db.rename(tmp_path / "moved.db")
        db.write_bytes((tmp_path / "moved.db").read_bytes())
    store.add_result(eid, "t", 2, {"m": 2})
    with pytest.raises(StoreError, match=f"the database file {db} was {how}"):
        store.flush()
    store.add_result(eid, "t", 3, {"m": 3})  # said once; nowhere to write it
    with pytest.raises(StoreError, match=f"was {how}"):
        store.results(eid)
    store.close()  # already said: closing is quiet
    assert db.exists() == (how == "replaced")



def test_an_immutable_sqlite_file_is_read_but_never_written(tmp_path):
    """A store that only reads may read a protected database; the first write is one StoreError
    naming the file and the cause, and nothing more is tried (SQLite's mapped shared-memory file
    would be SIGBUS)."""
    import subprocess

    url = default_database_url(tmp_path / "run")
    with Store(url) as store:
        eid = store.get_or_create_experiment("frozen", spec={}, metric="score", mode="max")
        store.add_trial(eid, "t0", 0, {"x": 1}, "RUNNING")
    db = tmp_path / "run" / "tuner.db"
    done = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {done.stderr.strip()}")
    try:
        store = Store(url, create=False)
        assert [t["trial_id"] for t in store.trials(eid)] == ["t0"]
        store.add_results(eid, [("t0", 1, {"score": 1.0})])
        with pytest.raises(StoreError) as info:
            store.flush()
        assert str(info.value) == (f"tuner store {url}: cannot write {db}: it is immutable (chattr +i) or otherwise "
                                   f"protected: Operation not permitted; nothing since could be stored")
        store.add_results(eid, [("t0", 2, {"score": 2.0})])  # said once; nothing more is tried
        store.close()
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    with Store(url, create=False) as store:
        assert store.results(eid) == []


_AFTER_ABANDON = """
import os, subprocess, sys
from tuner.store import Store, StoreError
url, files = sys.argv[1], sys.argv[2:]
store = Store(url)
eid = store.get_or_create_experiment("frozen", spec={}, metric="score", mode="max")
store.flush()
subprocess.run(["chattr", "+i", *files], check=True)
os.sync()  # the mapped pages written back: their next write faults, as once the kernel writes them back itself
try:
    store.add_result(eid, "t0", 1, {"score": 1.0})
    store.flush()
except StoreError as exc:
    print("writer:", exc)
try:
    Store(url, create=False)
    print("opened")
except StoreError as exc:
    print("reader:", exc)
"""


def test_a_database_abandoned_by_its_writer_is_never_opened_again_by_that_process(tmp_path):
    """SQLite shares a file's mapped shared memory among all of a process's connections: a new
    connection after the writer gave up on a protected file would take its locks in that mapping
    (SIGBUS). It is one StoreError instead, saying why and where the database can still be read."""
    import subprocess
    import sys

    url = default_database_url(tmp_path / "run")
    with Store(url) as store:  # the WAL and shared-memory files exist, as during a sweep
        store.get_or_create_experiment("frozen", spec={}, metric="score", mode="max")
    db = tmp_path / "run" / "tuner.db"
    files = [str(db), f"{db}-wal", f"{db}-shm"]
    for path in files[1:]:
        open(path, "ab").close()
    probe = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {probe.stderr.strip()}")
    subprocess.run(["chattr", "-i", str(db)], check=True)
    try:
        done = subprocess.run([sys.executable, "-c", _AFTER_ABANDON, url, *files], capture_output=True, text=True,
                              timeout=120)
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)
    assert done.returncode == 0, done.stdout + done.stderr
    why = f"cannot write {db}: it is immutable (chattr +i) or otherwise protected: Operation not permitted"
    assert f"writer: tuner store {url}: {why}; nothing since could be stored" in done.stdout, done.stdout
    assert f"reader: the database {db} failed in this process ({why}" in done.stdout, done.stdout
    assert "open it from another process" in done.stdout
    with Store(url, create=False) as store:  # another process reads it
        assert store.get_experiment("frozen") is not None
