"""Tests of tuner.store on SQLite (embedded default) and PostgreSQL (multi-node)."""

from __future__ import annotations

import datetime as dt
import math
import os
import threading
import time
import uuid

import numpy as np
import pytest
import sqlalchemy as sa

from tuner.store import SCHEMA_VERSION, Store, StoreError, default_database_url, mask_url
from tuner.store import codec
from tuner.store.schema import metadata, schema_version

PG_URL = os.environ.get("TUNER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL URL whose search_path is a schema of this test session only, so that parallel
    test runs against the same database do not see each other's tables."""
    try:
        import psycopg  # noqa: F401
    except ImportError as e:  # pragma: no cover
        pytest.skip(f"psycopg is not installed ({e}); cannot test PostgreSQL")
    name = f"tuner_store_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    except sa.exc.OperationalError as e:
        admin.dispose()
        pytest.skip(f"PostgreSQL is unreachable at {mask_url(PG_URL)}: {e.orig}")
    url = sa.make_url(PG_URL).update_query_dict({"options": f"-csearch_path={name}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        # A directory that does not exist yet: the store creates it.
        return default_database_url(tmp_path / "run")
    u = request.getfixturevalue("pg_url")
    engine = sa.create_engine(u)
    try:
        metadata.drop_all(engine)  # all tables of the store, schema_version included
    finally:
        engine.dispose()
    return u


@pytest.fixture
def store(url):
    s = Store(url, flush_interval_s=0.005)
    yield s
    s.close()


def _exp(store: Store, name: str = "exp") -> int:
    return store.get_or_create_experiment(name, spec={"stop": {"training_iteration": 5}}, metric="loss", mode="min")


def _raw_engine(url: str) -> sa.Engine:
    return sa.create_engine(url)


# ------------------------------------------------------------------------------------------- tests


def test_experiment_create_get_idempotent(store):
    eid = store.get_or_create_experiment(
        "ppo-cartpole", spec={"lr": [1e-3, 1e-4], "n": 3}, metric="episode_return_mean", mode="max"
    )
    assert isinstance(eid, int)
    again = store.get_or_create_experiment("ppo-cartpole", spec={"other": 1}, metric="x", mode="min")
    assert again == eid
    exp = store.get_experiment("ppo-cartpole")
    assert exp["id"] == eid and exp["name"] == "ppo-cartpole"
    assert exp["spec"] == {"lr": [1e-3, 1e-4], "n": 3}  # the first spec is kept
    assert (exp["metric"], exp["mode"]) == ("episode_return_mean", "max")
    assert exp["created_at"] <= exp["updated_at"] <= time.time()
    assert store.get_experiment("missing") is None

    other = store.get_or_create_experiment("second", spec={}, metric=None, mode=None)
    assert other != eid
    assert [e["name"] for e in store.list_experiments()] == ["ppo-cartpole", "second"]

    store.set_experiment_status(eid, "TERMINATED")
    assert store.get_experiment("ppo-cartpole")["status"] == "TERMINATED"


def test_trials_add_update_read(store):
    eid = _exp(store)
    store.add_trial(eid, "t1", 1, {"lr": 0.01, "layers": [64, 64]}, "PENDING", config_blob=b"\x80\x04blob")
    store.add_trial(eid, "t0", 0, {"lr": 0.1}, "PENDING")
    store.update_trial("t0", status="RUNNING", checkpoint_path="/ckpt/0", last_result={"loss": 1.5})
    store.update_trial("t0", num_failures=2, error="Traceback: boom")
    store.update_trial("t1", status="TERMINATED", config={"lr": 0.02}, config_blob=b"new")

    ts = store.trials(eid)
    assert [t["trial_id"] for t in ts] == ["t0", "t1"]  # ordered by trial_index
    t0, t1 = ts
    assert t0["experiment_id"] == eid and t0["trial_index"] == 0
    assert t0["config"] == {"lr": 0.1} and t0["config_blob"] is None
    assert t0["status"] == "RUNNING" and t0["checkpoint_path"] == "/ckpt/0"
    assert t0["last_result"] == {"loss": 1.5}
    assert t0["num_failures"] == 2 and t0["error"] == "Traceback: boom"
    assert t1["status"] == "TERMINATED" and t1["config"] == {"lr": 0.02}
    assert t1["config_blob"] == b"new" and isinstance(t1["config_blob"], bytes)
    assert t1["num_failures"] == 0 and t1["last_result"] is None
    assert t1["created_at"] <= t1["updated_at"]

    with pytest.raises(TypeError, match="bogus"):
        store.update_trial("t0", bogus=1)
    assert store.trials(eid + 1000) == []


def test_thousand_results_read_back_once_in_order(store):
    eid = _exp(store)
    n_trials, n_iter = 4, 250
    for i in range(n_trials):
        store.add_trial(eid, f"trial_{i}", i, {"i": i}, "RUNNING")
    expected = {f"trial_{i}": [] for i in range(n_trials)}
    batch = []
    for it in range(n_iter):  # interleaved as a controller would see them
        for i in range(n_trials):
            r = {"training_iteration": it + 1, "loss": 1.0 / (it + 1) + i, "trial_id": f"trial_{i}",
                 "timestamp": 1_700_000_000.0 + it}
            expected[f"trial_{i}"].append(r)
            batch.append((f"trial_{i}", it + 1, r))
            if len(batch) == 7:
                store.add_results(eid, batch)
                batch = []
    store.add_results(eid, batch)
    store.flush()

    rows = store.results(eid)
    assert len(rows) == n_trials * n_iter
    assert rows == [r for i in range(n_trials) for r in expected[f"trial_{i}"]]
    assert store.results(eid, "trial_2") == expected["trial_2"]
    assert store.results(eid, "nope") == []

    engine = _raw_engine(store.engine.url.render_as_string(hide_password=False))
    try:
        with engine.connect() as conn:
            stamps = conn.execute(
                sa.text("SELECT timestamp FROM results WHERE trial_id = 'trial_0' ORDER BY iteration")
            ).scalars().all()
    finally:
        engine.dispose()
    assert stamps == [1_700_000_000.0 + it for it in range(n_iter)]


def test_replayed_results_are_stored_once(store):
    eid = _exp(store)
    store.add_trial(eid, "a", 0, {}, "RUNNING")
    rows = [("a", i, {"i": i, "v": "first"}) for i in range(10)]
    store.add_results(eid, rows)
    store.add_results(eid, [("a", i, {"i": i, "v": "replay-same-batch"}) for i in range(10)])
    store.flush()
    store.add_results(eid, [("a", i, {"i": i, "v": "replay-later"}) for i in range(5, 15)])
    store.add_result(eid, "a", 3, {"i": 3, "v": "replay-single"})
    store.flush()
    got = store.results(eid)
    assert [r["i"] for r in got] == list(range(15))
    assert [r["v"] for r in got] == ["first"] * 10 + ["replay-later"] * 5


def test_nan_numpy_datetime_and_odd_values_round_trip(store):
    eid = _exp(store)
    when = dt.datetime(2024, 5, 17, 12, 30, 1)

    class Odd:
        def __repr__(self):
            return "<odd>"

    result = {
        "nan": float("nan"),
        "inf": float("inf"),
        "ninf": -math.inf,
        "f32": np.float32(0.5),
        "f64": np.float64(1e-300),
        "i64": np.int64(2**40),
        "b": np.bool_(True),
        "arr": np.arange(6, dtype=np.float32).reshape(2, 3),
        "np_nan": np.float64("nan"),
        "when": when,
        "odd": Odd(),
        "tuple": (1, "x"),
        "nested": {"deep": [np.int32(3), {"x": np.float16(2.0)}]},
        np.int64(7): "numpy key",
    }
    store.add_trial(eid, "t", 0, {"lr": np.float64(0.1), "sizes": np.array([64, 64])}, "RUNNING")
    store.add_results(eid, [("t", 1, result)])
    store.update_trial("t", last_result=result)
    [got] = store.results(eid)
    assert math.isnan(got["nan"]) and math.isnan(got["np_nan"])
    assert got["inf"] == math.inf and got["ninf"] == -math.inf
    assert got["f32"] == 0.5 and got["f64"] == 1e-300 and got["i64"] == 2**40
    assert got["b"] is True
    assert got["arr"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert got["when"] == when.isoformat()
    assert got["odd"] == "<odd>"
    assert got["tuple"] == [1, "x"]
    assert got["nested"] == {"deep": [3, {"x": 2.0}]}
    assert got["7"] == "numpy key"
    [trial] = store.trials(eid)
    assert trial["config"] == {"lr": 0.1, "sizes": [64, 64]}
    assert math.isnan(trial["last_result"]["nan"])


def test_codec_never_fails():
    cyclic: dict = {"a": 1}
    cyclic["self"] = cyclic

    class BadRepr:
        def __repr__(self):
            raise RuntimeError("no repr")

    out = codec.decode(codec.encode({"c": cyclic, "bad": BadRepr(), (1, 2): {1, 2}, b"k": b"v"}))
    assert out["c"]["a"] == 1 and isinstance(out["c"]["self"], str)
    assert "BadRepr" in out["bad"]
    assert out["(1, 2)"] == [1, 2]
    assert codec.encode({"x": 1.5, "y": [1, None]}) == '{"x":1.5,"y":[1,null]}'
    assert codec.decode(None) is None


def test_flush_makes_writes_visible(url):
    # A long interval: without flush the writer would sit on the batch for 30 s.
    with Store(url, flush_interval_s=30.0) as store:
        eid = _exp(store)
        store.add_trial(eid, "t", 0, {}, "RUNNING")
        store.flush()
        engine = _raw_engine(url)
        try:
            with engine.connect() as conn:
                q = sa.text("SELECT count(*) FROM results")
                store.add_results(eid, [("t", i, {"i": i}) for i in range(50)])
                time.sleep(0.05)
                assert conn.execute(q).scalar() == 0  # still queued
                conn.rollback()
                t0 = time.monotonic()
                store.flush()
                assert time.monotonic() - t0 < 10  # flush does not wait for the interval
                assert conn.execute(q).scalar() == 50
        finally:
            engine.dispose()
        # Reads flush first: a reader in the same process sees its own writes.
        store.add_results(eid, [("t", 50, {"i": 50})])
        assert len(store.results(eid)) == 51


def test_writer_errors_surface_on_flush(store):
    eid = _exp(store)
    store.add_trial(eid, "good", 0, {}, "RUNNING")
    store.flush()
    store.add_results(eid, [("good", 1, {"ok": 1}), ("no-such-trial", 1, {"ok": 0})])
    with pytest.raises(StoreError, match="(?i)foreign key") as info:
        store.flush()
    assert info.value.__cause__ is not None
    # The error is reported once, the good row of the same batch is kept, the store keeps working.
    store.flush()
    store.add_results(eid, [("good", 2, {"ok": 2})])
    assert [r["ok"] for r in store.results(eid)] == [1, 2]


def test_error_raised_by_close(url):
    store = Store(url)
    eid = _exp(store)
    store.add_results(eid, [("ghost", 1, {})])
    with pytest.raises(StoreError):
        store.close()
    store.close()  # idempotent
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        store.add_results(eid, [("ghost", 2, {})])


def test_state_blobs_round_trip_and_overwrite(store):
    eid = _exp(store)
    other = _exp(store, "other")
    assert store.load_state(eid, "scheduler") is None
    store.save_state(eid, "scheduler", b"v1")
    store.save_state(other, "scheduler", b"other")
    assert store.load_state(eid, "scheduler") == b"v1"
    store.save_state(eid, "scheduler", b"v2")
    store.save_state(eid, "scheduler", bytearray(b"v3\x00\xff"))  # same batch: last one wins
    store.save_state(eid, "searcher", b"s" * 100_000)
    assert store.load_state(eid, "scheduler") == b"v3\x00\xff"
    assert store.load_state(eid, "searcher") == b"s" * 100_000
    assert store.load_state(other, "scheduler") == b"other"
    with pytest.raises(TypeError):
        store.save_state(eid, "x", "not bytes")


def test_schema_version_mismatch_raises(url):
    Store(url).close()
    engine = _raw_engine(url)
    try:
        with engine.begin() as conn:
            assert conn.execute(sa.select(schema_version.c.version)).scalars().all() == [SCHEMA_VERSION]
            conn.execute(schema_version.update().values(version=999))
    finally:
        engine.dispose()
    with pytest.raises(StoreError) as info:
        Store(url)
    msg = str(info.value)
    assert "999" in msg and f"expects schema version {SCHEMA_VERSION}" in msg


def test_create_false_on_empty_database_raises(url):
    with pytest.raises(StoreError, match="no tuner schema"):
        Store(url, create=False)


def test_second_store_sees_committed_rows(url):
    with Store(url) as writer:
        eid = _exp(writer)
        writer.add_trial(eid, "t", 0, {"a": 1}, "RUNNING")
        writer.add_results(eid, [("t", i, {"i": i}) for i in range(20)])
        writer.save_state(eid, "k", b"blob")
        writer.flush()
        with Store(url, create=False) as reader:
            assert reader.get_experiment("exp")["id"] == eid
            assert [r["i"] for r in reader.results(eid)] == list(range(20))
            assert reader.trials(eid)[0]["config"] == {"a": 1}
            assert reader.load_state(eid, "k") == b"blob"
            writer.add_results(eid, [("t", 20, {"i": 20})])
            writer.flush()
            assert len(reader.results(eid)) == 21


def test_concurrent_writers_threads(store):
    eid = _exp(store)
    for i in range(4):
        store.add_trial(eid, f"t{i}", i, {}, "RUNNING")

    def work(i):
        for it in range(100):
            store.add_results(eid, [(f"t{i}", it, {"it": it})])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = store.results(eid)
    assert len(rows) == 400
    assert [r["it"] for r in store.results(eid, "t3")] == list(range(100))


def test_mask_url_hides_passwords():
    assert mask_url("postgresql://u:secret@host/db") == "postgresql://u:***@host/db"
    assert mask_url("postgresql+psycopg://u:p%40ss@h:5432/db?sslmode=require") == (
        "postgresql+psycopg://u:***@h:5432/db?sslmode=require"
    )
    assert "secret" not in mask_url("not a url://u:secret@host")
    assert mask_url("sqlite:////tmp/x/tuner.db") == "sqlite:////tmp/x/tuner.db"


def test_default_database_url_and_display(tmp_path):
    url = default_database_url(tmp_path / "runs" / "exp")
    assert url == f"sqlite:///{(tmp_path / 'runs' / 'exp').resolve()}/tuner.db"
    with Store(url) as store:
        assert store.url_for_display == url
        assert (tmp_path / "runs" / "exp" / "tuner.db").exists()
    with Store("sqlite://") as mem:  # in-memory works too (one shared connection)
        eid = _exp(mem)
        mem.add_trial(eid, "t", 0, {}, "RUNNING")
        mem.add_results(eid, [("t", 1, {"x": 1})])
        assert mem.results(eid) == [{"x": 1}]


def test_password_never_displayed(url):
    u = sa.make_url(url)
    if u.get_backend_name() == "postgresql":
        url = u.set(password="hunter2").render_as_string(hide_password=False)  # trust auth ignores it
    with Store(url) as store:
        shown = [store.url_for_display, repr(store), store._thread.name]
        eid = _exp(store)
        store.add_results(eid, [("ghost", 1, {})])
        with pytest.raises(StoreError) as info:
            store.flush()
        shown.append(str(info.value))
    assert not any("hunter2" in s for s in shown)
    if "***" in url or u.get_backend_name() == "postgresql":
        assert "***" in store.url_for_display


def test_bad_values_are_reported_without_losing_the_batch(store):
    import enum

    class Status(str, enum.Enum):
        RUNNING = "RUNNING"

    eid = _exp(store)
    store.add_trial(eid, "t", 0, {}, Status.RUNNING)
    store.add_results(eid, [("t", 1, {"ok": 1}), ("t", None, {"bad": 1})])  # iteration None
    store.add_results(eid, [("t", 2, {"ok": 2, "timestamp": float("nan")})])
    with pytest.raises(StoreError):
        store.flush()
    assert [r["ok"] for r in store.results(eid)] == [1, 2]
    assert store.trials(eid)[0]["status"] == "RUNNING"


def test_batch_groups_writes_into_one_transaction(store):
    """Everything written inside store.batch() is committed together, after the block."""
    eid = store.get_or_create_experiment("grouped", spec={}, metric=None, mode=None)
    with store.batch():
        store.add_trial(eid, "g_1", 0, {"x": 1}, "PENDING")
        store.save_state(eid, "searcher", b"after-trial-1")
        store.flush()  # the block's writes are not queued yet: nothing of them is visible
        assert store.trials(eid) == [] and store.load_state(eid, "searcher") is None
    store.flush()
    assert [t["trial_id"] for t in store.trials(eid)] == ["g_1"]
    assert store.load_state(eid, "searcher") == b"after-trial-1"
