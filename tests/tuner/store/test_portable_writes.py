"""The portable forms of the store's writes (what a database other than SQLite and PostgreSQL gets:
UPDATE-then-INSERT upserts, results inserted after reading which are stored) leave the same rows
as the native forms, run here side by side on SQLite."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tuner.store.schema import checkpoints, experiment_state, metadata, results, trials
from tuner.store.writes import CHECKPOINT_UPSERT, STATE_UPSERT, TRIAL_UPSERT, Upsert, insert_new_results


@pytest.fixture
def two_databases() -> Iterator[tuple[Connection, Connection]]:
    engines = [sa.create_engine("sqlite://") for _ in range(2)]
    conns = []
    for engine in engines:
        metadata.create_all(engine)
        conn = engine.connect()
        with conn.begin():
            conn.exec_driver_sql("INSERT INTO experiments (id, name, spec, status, created_at, updated_at) "
                                 "VALUES (1, 'e', '{}', 'RUNNING', 0, 0)")
        conns.append(conn)
    yield conns[0], conns[1]
    for conn, engine in zip(conns, engines):
        conn.close()
        engine.dispose()


def _trial(trial_id: str, status: str, blob: bytes | None, t: float) -> dict:
    return {"experiment_id": 1, "trial_id": trial_id, "trial_index": int(trial_id[1:]), "config": "{}",
            "config_blob": blob, "status": status, "num_failures": 0, "created_at": t, "updated_at": t}


def _state(key: str, value: bytes, t: float) -> dict:
    return {"experiment_id": 1, "key": key, "value": value, "updated_at": t}


def _checkpoint(trial_id: str, path: str, iteration: int, deleted_at: float | None) -> dict:
    return {"experiment_id": 1, "trial_id": trial_id, "path": path, "iteration": iteration,
            "timestamp": float(iteration), "metrics": None, "deleted": deleted_at is not None,
            "deleted_at": deleted_at}


UPSERT_CASES = [
    pytest.param(TRIAL_UPSERT, trials, [
        [_trial("t0", "PENDING", b"a", 1.0), _trial("t1", "PENDING", None, 1.0)],
        # t0 again without a blob keeps its blob; t1 gets one; t2 is new
        [_trial("t0", "RUNNING", None, 2.0), _trial("t1", "RUNNING", b"b", 2.0), _trial("t2", "PENDING", None, 2.0)],
    ], id="trials"),
    pytest.param(STATE_UPSERT, experiment_state, [
        [_state("searcher", b"1", 1.0), _state("scheduler", b"2", 1.0)],
        [_state("searcher", b"3", 2.0)],
    ], id="state"),
    pytest.param(CHECKPOINT_UPSERT, checkpoints, [
        [_checkpoint("t0", "/c/1", 1, None), _checkpoint("t0", "/c/2", 2, None)],
        [_checkpoint("t0", "/c/1", 1, 5.0), _checkpoint("t1", "/c/1", 1, None)],
    ], id="checkpoints"),
]


def _rows(conn: Connection, table: sa.Table) -> list[tuple]:
    cols = [c for c in table.c if c.name != "id"]
    return [tuple(r) for r in conn.execute(sa.select(*cols).order_by(*cols))]


@pytest.mark.parametrize("upsert,table,batches", UPSERT_CASES)
def test_a_row_by_row_upsert_leaves_the_rows_of_the_native_one(two_databases, upsert: Upsert, table, batches):
    native_conn, portable_conn = two_databases
    native = upsert.native("sqlite")
    assert native is not None and upsert.native("mysql") is None
    for rows in batches:
        with native_conn.begin():
            native_conn.execute(native, rows)
        with portable_conn.begin():
            upsert.row_by_row(portable_conn, rows)
    assert _rows(portable_conn, table) == _rows(native_conn, table)
    if table is trials:
        assert [r["config_blob"] for r in portable_conn.execute(sa.select(trials).order_by(trials.c.trial_id))
                .mappings()] == [b"a", b"b", None]


def test_portable_result_inserts_ignore_stored_results_as_the_native_one_does(two_databases):
    native_conn, portable_conn = two_databases
    sql = ("INSERT INTO results (experiment_id, trial_id, iteration, timestamp, data) VALUES (?, ?, ?, ?, ?) "
           "ON CONFLICT (trial_id, iteration) DO NOTHING")
    inserts: list[Callable[[Connection, list], None]] = [
        lambda conn, rows: conn.exec_driver_sql(sql, rows), insert_new_results,
    ]
    first = [(1, f"t{t}", i, float(i), f'{{"i": {i}}}') for t in range(3) for i in range(1, 4)]
    replay = [(1, "t0", 3, 9.0, '{"replayed": true}'), (1, "t0", 4, 4.0, '{"i": 4}')]
    many = [(1, f"u{t}", 1, 1.0, "{}") for t in range(1200)]  # more trials than one IN (...) list holds
    for conn, insert in zip((native_conn, portable_conn), inserts):
        for rows in (first, replay, many, many):
            with conn.begin():
                insert(conn, rows)
    assert _rows(portable_conn, results) == _rows(native_conn, results)
    assert len(_rows(portable_conn, results)) == len(first) + 1 + len(many)
