"""Tests of tuner.store on SQLite (embedded default) and PostgreSQL (multi-node)."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from tuner.store import SCHEMA_VERSION, NoSchemaError, Store, StoreError, default_database_url, mask_url
from tuner.store import codec
from tuner.store.schema import schema_version

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
    if url.startswith("sqlite:///"):  # an empty file (a missing one is refused before: see test_store_faults)
        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    with pytest.raises(NoSchemaError, match="is empty: not a tuner database|holds no tuner tables"):
        Store(url, create=False)
    if url.startswith("sqlite:///"):
        assert path.stat().st_size == 0  # nothing was written to read it


def test_a_reader_sees_no_schema_or_all_of_it(url):
    """The schema is created in one transaction: a reader that looks while the first table has
    just been created sees no table at all, and is told there is no schema (not a broken one)."""
    first = schema_version.metadata.sorted_tables[0]
    seen: list[list[str]] = []
    refused: list[BaseException] = []

    def look(_target, _conn, **_kw):
        engine = sa.create_engine(url)
        try:
            seen.append(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()
        try:
            Store(url, create=False).close()
        except StoreError as exc:
            refused.append(exc)

    sa.event.listen(first, "after_create", look)
    try:
        Store(url).close()
    finally:
        sa.event.remove(first, "after_create", look)
    assert seen == [[]]
    assert len(refused) == 1 and isinstance(refused[0], NoSchemaError), refused
    with Store(url, create=False) as reader:
        assert reader.get_experiment("nothing") is None


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
        writers = [t.name for t in threading.enumerate() if t.name.startswith("tuner-store-writer[")]
        assert f"tuner-store-writer[{store.url_for_display}]" in writers
        shown = [store.url_for_display, repr(store), *writers]
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


def _reference_best(trials: list[dict], metric: str, mode: str, filter_nan_and_inf: bool = True):
    """ExperimentAnalysis.get_best_trial(scope='last') on the rows of Store.trials()."""
    from tuner.search.variants import flatten_dict

    best, best_value = None, None
    for t in trials:
        v = flatten_dict(t["last_result"] or {}).get(metric)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        v = float(v)
        if filter_nan_and_inf and not math.isfinite(v):
            continue
        if best_value is None or (v > best_value if mode == "max" else v < best_value):
            best, best_value = t, v
    return None if best is None else (best["trial_id"], best_value)


def test_best_trial_matches_the_analysis_rule(store):
    eid = _exp(store)
    other = _exp(store, "other")
    store.add_trial(other, "elsewhere", 0, {}, "TERMINATED")
    store.update_trial("elsewhere", last_result={"score": 1e9, "info": {"kl": -1e9}})
    last_results = [
        {"score": 3, "info": {"kl": 0.5, "lr": {"now": 1}}, "a/b": 7.0},
        {"score": 9.5, "info": {"kl": float("nan")}, "note": "has NaN elsewhere"},
        {"score": float("inf"), "info": {"kl": 0.1}},
        {"score": True, "info": {"kl": "not a number"}},
        {"score": 9.5, "info": {"kl": 0.7}},  # ties with trial 1: the earlier one wins
        {"score": -4, "a": {"b": 8.0}, "info": {"kl": -0.25, "x": float("-inf")}},
        {"other": 1},
        None,  # no result yet
        {"score": "12", "info": {}},
        {"score": 2**60, "info": {"kl": {"deep": 1}}},  # a dict: not a leaf
    ]
    for i, r in enumerate(last_results):
        store.add_trial(eid, f"t{i}", i, {"i": i}, "RUNNING")
        if r is not None:
            store.update_trial(f"t{i}", status="TERMINATED", last_result=r)
    trials = store.trials(eid)
    for metric in ("score", "info/kl", "a/b", "info/lr/now", "missing", "info"):
        for mode in ("max", "min"):
            for keep in (True, False):
                expected = _reference_best(trials, metric, mode, keep)
                got = store.best_trial(eid, metric, mode, filter_nan_and_inf=keep)
                if expected is None:
                    assert got is None, (metric, mode, keep)
                    continue
                assert (got["trial_id"], got["metric_value"]) == expected, (metric, mode, keep)
    best = store.best_trial(eid, "score", "max")
    assert best["trial_id"] == "t9" and best["config"] == {"i": 9}
    assert best["last_result"] == last_results[9] and best["metric_value"] == float(2**60)
    assert store.best_trial(eid, "info/kl", "min")["trial_id"] == "t5"
    assert store.best_trial(eid, "a/b", "max")["trial_id"] == "t5"  # both spellings count: 8 > 7
    assert store.best_trial(eid + 1000, "score", "max") is None
    with pytest.raises(ValueError, match="mode"):
        store.best_trial(eid, "score", "maximum")


def test_best_trial_of_any_metric_follows_the_one_rule(store):
    """The experiment's metric comes from the index, any other from the decoded last results: NaN
    and infinities left out, both spellings of a nested key, the last spelling winning."""
    eid = _exp(store)
    for i in range(20):
        store.add_trial(eid, f"t{i}", i, {}, "TERMINATED")
        r = {"score": i % 7, "info": {"kl": i / 10}, "flat/key": -i, "s": "x:NaN,[Infinity"}
        if i == 3:
            r.update(nan=float("nan"), inf=[float("inf"), float("-inf")], score=float("nan"))
        if i == 19:
            r["info"] = {"kl": float("inf")}
        store.update_trial(f"t{i}", last_result=r)
    store.add_trial(eid, "t20", 20, {}, "TERMINATED")
    store.update_trial("t20", last_result={"score": 1})
    store.flush()
    assert store.best_trial(eid, "score", "max")["trial_id"] == "t6"
    assert store.best_trial(eid, "score", "min")["trial_id"] == "t0"
    assert store.best_trial(eid, "info/kl", "max")["trial_id"] == "t18"
    assert store.best_trial(eid, "info/kl", "max", filter_nan_and_inf=False)["trial_id"] == "t19"
    assert store.best_trial(eid, "flat/key", "max")["trial_id"] == "t0"
    store.update_trial("t5", last_result={"a": {"b/c": 5}, "score": 5})
    store.update_trial("t6", last_result={"a": {"b": {"c": 4}}, "score": 5})
    store.update_trial("t7", last_result={"a/b/c": 3, "score": 5})
    assert store.best_trial(eid, "a/b/c", "max")["trial_id"] == "t5"
    assert store.best_trial(eid, "a/b/c", "min")["trial_id"] == "t7"


def _random_last_results(rng, n: int) -> list[dict]:
    leaves = [0, 1, -2, 2.5, 2.5, -0.0, 1e300, -1e-300, 2**70, True, False, None, "7", "NaN", float("nan"),
              float("inf"), float("-inf"), [1.0], {}, {"x": 1}]
    out = []
    for _ in range(n):
        r = {}
        for key in ("m", "a/b", "z:NaN", "a/b/c"):
            if rng.random() < 0.8:
                r[key] = rng.choice(leaves)
        if rng.random() < 0.7:
            r["a"] = {"b": rng.choice(leaves)} if rng.random() < 0.8 else rng.choice(leaves)
        if rng.random() < 0.3:
            r.setdefault("a", {})
            if isinstance(r["a"], dict):
                r["a"]["b/c"] = rng.choice(leaves)
        if rng.random() < 0.3:
            r["noise"] = [float("nan"), "x:Infinity", {"q": float("-inf")}]
        out.append(r)
    return out


RANDOM_METRICS = ("m", "a/b", "z:NaN", "a", "a/b/c")


@pytest.mark.parametrize("seed", [1, 5, 9])
def test_best_trial_random_results_agree_with_the_analysis_rule(store, seed):
    """Every path of best_trial (the indexed metric_value of the experiment's own metric, JSON
    in SQL for another metric, every value for filter_nan_and_inf=False) gives the analysis's
    answer."""
    import random

    rng = random.Random(seed)
    results = _random_last_results(rng, 120)
    for own in (None,) + RANDOM_METRICS:  # None: every metric is "another" metric
        eid = store.get_or_create_experiment(f"e-{own}", spec={}, metric=own, mode="max")
        for i, r in enumerate(results):
            tid = f"{own}-{i:03d}"
            store.add_trial(eid, tid, i, {}, "RUNNING")
            store.update_trial(tid, status="TERMINATED", last_result=r)
        trials = store.trials(eid)
        for metric in RANDOM_METRICS if own is None else (own,):
            for mode in ("max", "min"):
                for keep in (True, False):
                    expected = _reference_best(trials, metric, mode, keep)
                    got = store.best_trial(eid, metric, mode, filter_nan_and_inf=keep)
                    if expected is None:
                        assert got is None, (own, metric, mode, keep)
                    else:
                        got_pair = (got["trial_id"], got["metric_value"])
                        same = got_pair == expected or (math.isnan(expected[1]) and got_pair[0] == expected[0])
                        assert same, (own, metric, mode, keep, got_pair, expected)


def test_metric_value_column_follows_last_result(url):
    """trials.metric_value holds the experiment's metric of the last result, also when another
    store (a resumed sweep) writes it, and best_trial on that metric reads only the index."""
    with Store(url) as first:
        eid = first.get_or_create_experiment("own", spec={}, metric="info/kl", mode="min")
        for i in range(4):
            first.add_trial(eid, f"t{i}", i, {}, "RUNNING")
        first.update_trial("t0", last_result={"info": {"kl": 0.5}})
        first.update_trial("t1", last_result={"info": {"kl": float("nan")}})
        first.update_trial("t2", last_result={"info/kl": np.float32(0.25)})
        first.flush()
    with Store(url) as second:  # knows neither the trials nor the experiment
        second.update_trial("t3", status="TERMINATED", last_result={"info": {"kl": 0.125}})
        second.update_trial("t0", status="TERMINATED")  # no last_result: the value stays
        assert second.best_trial(eid, "info/kl", "min")["trial_id"] == "t3"
        second.update_trial("t3", last_result={"info": {"kl": True}})
        best = second.best_trial(eid, "info/kl", "min")
        assert (best["trial_id"], best["metric_value"]) == ("t2", 0.25)
        assert second.best_trial(eid, "info/kl", "max")["trial_id"] == "t0"
    engine = _raw_engine(url)
    try:
        with engine.connect() as conn:
            values = dict(conn.execute(sa.text("SELECT trial_id, metric_value FROM trials")).all())
    finally:
        engine.dispose()
    assert values == {"t0": 0.5, "t1": None, "t2": 0.25, "t3": None}


def test_one_batch_keeps_the_order_of_writes_per_trial(url):
    """The writer merges ops into few statements; per trial the effect is that of the writes in
    order (an add after an update of the same trial wins over it), as when each is flushed alone."""
    def scenario(store: Store, eid: int, p: str, flush_each: bool) -> None:
        ops = [
            lambda: store.add_trial(eid, p + "a", 0, {"v": 1}, "PENDING", config_blob=b"blob-a"),
            lambda: store.add_trial(eid, p + "b", 1, {"v": 1}, "PENDING"),
            lambda: store.update_trial(p + "a", status="RUNNING", last_result={"loss": 3.0}),
            lambda: store.save_state(eid, "searcher", b"s1"),
            lambda: store.add_trial(eid, p + "c", 2, {"v": 1}, "PENDING"),
            lambda: store.add_trial(eid, p + "a", 0, {"v": 2}, "PENDING"),  # re-added: config and status
            lambda: store.update_trial(p + "b", status="ERROR", error="boom", num_failures=1),
            lambda: store.update_trial(p + "a", checkpoint_path="/ckpt"),
            lambda: store.set_experiment_status(eid, "RUNNING"),
            lambda: store.add_results(eid, [(p + "c", 1, {"loss": 1.0})]),
            lambda: store.update_trial(p + "c", status="TERMINATED", last_result={"loss": 1.0}),
            lambda: store.save_state(eid, "searcher", b"s2"),
            lambda: store.add_trial(eid, p + "b", 1, {"v": 3}, "PENDING", config_blob=b"blob-b"),
        ]
        if flush_each:
            for op in ops:
                op()
                store.flush()
        else:
            with store.batch():
                for op in ops:
                    op()
            store.flush()

    def state(store: Store, eid: int) -> list:
        keep = ("trial_index", "config", "config_blob", "status", "error", "num_failures",
                "checkpoint_path", "last_result")
        return [
            {k: t[k] for k in keep} for t in store.trials(eid)
        ] + [store.load_state(eid, "searcher"), store.results(eid), store.best_trial(eid, "loss", "min")["trial_index"]]

    with Store(url, flush_interval_s=30.0) as store:
        one = store.get_or_create_experiment("one-by-one", spec={}, metric="loss", mode="min")
        grouped = store.get_or_create_experiment("grouped", spec={}, metric="loss", mode="min")
        scenario(store, one, "x", flush_each=True)
        scenario(store, grouped, "y", flush_each=False)
        expected = state(store, one)
        assert state(store, grouped) == expected
        assert expected[0]["config"] == {"v": 2} and expected[0]["status"] == "PENDING"
        assert expected[0]["config_blob"] == b"blob-a" and expected[0]["checkpoint_path"] == "/ckpt"
        assert expected[1]["status"] == "PENDING" and expected[1]["error"] == "boom"
        assert expected[1]["config_blob"] == b"blob-b"
        assert expected[3] == b"s2" and expected[-1] == 2
        assert store.get_experiment("grouped")["status"] == "RUNNING"


def test_a_running_trials_newest_result_is_its_last_result(url):
    """A reader in another process sees each trial's newest stored result as its last result, and
    the best trial by it, before any status change; within one batch the last write wins, a
    result or the controller's own last_result."""
    with Store(url, flush_interval_s=30.0) as writer, Store(url, create=False) as reader:
        eid = writer.get_or_create_experiment("live", spec={}, metric="loss", mode="min")
        writer.add_trial(eid, "t0", 0, {}, "RUNNING")
        writer.add_trial(eid, "t1", 1, {}, "RUNNING")
        writer.add_results(eid, [("t0", 1, {"loss": 3.0, "training_iteration": 1})])
        writer.add_results(eid, [("t0", 2, {"loss": 2.0, "training_iteration": 2}),
                                 ("t1", 1, {"loss": 1.5, "training_iteration": 1})])
        writer.flush()
        last = {t["trial_id"]: t["last_result"] for t in reader.trials(eid)}
        assert last == {"t0": {"loss": 2.0, "training_iteration": 2}, "t1": {"loss": 1.5, "training_iteration": 1}}
        best = reader.best_trial(eid, "loss", "min")
        assert (best["trial_id"], best["metric_value"]) == ("t1", 1.5)
        assert reader.best_trial(eid, "training_iteration", "max")["trial_id"] == "t0"

        with writer.batch():  # a status change, then a newer result; and the other way round
            writer.update_trial("t0", status="PAUSED", last_result={"loss": 2.0, "training_iteration": 2})
            writer.add_results(eid, [("t0", 3, {"loss": 0.5, "training_iteration": 3})])
            writer.add_results(eid, [("t1", 2, {"loss": 9.0, "training_iteration": 2})])
            writer.update_trial("t1", status="TERMINATED", last_result={"loss": 1.0, "training_iteration": 1})
        writer.flush()
        rows = {t["trial_id"]: t for t in reader.trials(eid)}
        assert rows["t0"]["last_result"]["loss"] == 0.5 and rows["t0"]["status"] == "PAUSED"
        assert rows["t1"]["last_result"]["loss"] == 1.0 and rows["t1"]["status"] == "TERMINATED"
        best = reader.best_trial(eid, "loss", "min")
        assert (best["trial_id"], best["metric_value"]) == ("t0", 0.5)

        writer.add_results(eid, [("t0", 3, {"loss": 7.0, "training_iteration": 3})])  # replayed after a restore
        writer.flush()
        assert [r["loss"] for r in reader.results(eid, "t0")] == [3.0, 2.0, 0.5]  # the first write stays
        assert reader.best_trial(eid, "loss", "min")["trial_id"] == "t1"  # the trial is at its replay
