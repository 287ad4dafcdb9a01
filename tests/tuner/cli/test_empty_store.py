"""A zero-byte tuner.db (a sweep whose start was cut short), or a database that is no tuner
database: every read-only verb and tune.load says so in one line, and none of them creates or
writes anything in it."""

from __future__ import annotations

import hashlib
import sqlite3
import uuid

import pytest
import sqlalchemy as sa

from tests.tuner.cli.conftest import cli
from tuner import tune
from tuner.store import StoreError, mask_url

READ_VERBS = (["show", "x"], ["best", "x"], ["export", "x", "--format", "csv"], ["tensorboard", "x", "--port", "0"],
              ["logs", "x"])


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_zero_byte_store_is_one_line_for_every_read_verb_and_stays_empty(tmp_path):
    run_dir = tmp_path / "x"
    run_dir.mkdir()
    db = run_dir / "tuner.db"
    db.touch()
    line = f"{db} is empty: not a tuner database (was the sweep's start interrupted?)"
    for verb in READ_VERBS:
        proc = cli(*verb, "--storage-path", str(tmp_path))
        assert (proc.returncode, proc.stderr) == (1, f"tuner: error: {line}\n"), verb
    listed = cli("ls", "--storage-path", str(tmp_path))
    assert listed.returncode == 0 and listed.stderr == f"tuner: skipping x: {line}\n", listed.stderr
    with pytest.raises(StoreError, match="is empty: not a tuner database"):
        tune.load(run_dir)
    assert db.stat().st_size == 0 and sorted(p.name for p in run_dir.iterdir()) == ["tuner.db"]


def test_a_sqlite_file_of_another_program_is_read_as_it_is(tmp_path):
    run_dir = tmp_path / "x"
    run_dir.mkdir()
    db = run_dir / "tuner.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.commit()
    conn.close()
    before = _digest(db)
    for verb in READ_VERBS:
        proc = cli(*verb, "--storage-path", str(tmp_path))
        assert (proc.returncode, proc.stderr) == (1, f"tuner: error: {db} holds no tuner tables: not a tuner "
                                                     f"database\n"), verb
    with pytest.raises(StoreError, match="holds no tuner tables"):
        tune.load(run_dir)
    assert _digest(db) == before and sorted(p.name for p in run_dir.iterdir()) == ["tuner.db"]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not turned into WAL
    conn.close()


def test_read_verbs_create_no_table_in_a_database_without_one(postgres_url, tmp_path):
    schema = f"tuner_empty_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(postgres_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    url_text = url.render_as_string(hide_password=False)
    try:
        line = f"tuner: error: database {mask_url(url_text)} holds no tuner tables: no sweep is stored there\n"
        for verb in READ_VERBS:
            proc = cli(*verb, "--database-url", url_text, "--storage-path", str(tmp_path))
            assert (proc.returncode, proc.stderr) == (1, line), verb
        listed = cli("ls", "--database-url", url_text)  # a shared database before its first sweep
        assert (listed.returncode, listed.stdout, listed.stderr) == (0, f"no sweeps in {mask_url(url_text)}\n", "")
        with pytest.raises(StoreError, match="holds no tuner tables"):
            tune.load(tmp_path / "x", database_url=url_text)
        with admin.connect() as conn:
            tables = conn.execute(sa.text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                                  {"s": schema}).all()
        assert tables == [] and list(tmp_path.iterdir()) == []
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
