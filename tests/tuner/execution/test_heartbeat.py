"""A driver's heartbeat in the store, and the status a reader shows from it."""

from __future__ import annotations

import threading

import pytest

from tuner.execution.heartbeat import HEARTBEAT_ENV, Heartbeat, interval_s, owner, shown_status, stale_after_s
from tuner.store import Store, StoreError, default_database_url


def test_a_running_sweep_whose_heartbeat_stopped_is_shown_interrupted(monkeypatch):
    monkeypatch.setenv(HEARTBEAT_ENV, "2")
    assert (interval_s(), stale_after_s()) == (2.0, 8.0)
    now = 1_000.0
    assert shown_status({"status": "RUNNING", "heartbeat_at": now - 7.9}, now) == "RUNNING"
    assert shown_status({"status": "RUNNING", "heartbeat_at": now - 8.1}, now) == "INTERRUPTED"
    assert shown_status({"status": "RUNNING", "heartbeat_at": None}, now) == "RUNNING"  # an older driver
    assert shown_status({"status": "TERMINATED", "heartbeat_at": now - 100}, now) == "TERMINATED"
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv(HEARTBEAT_ENV, bad)
        assert interval_s() == 5.0


def test_the_owner_is_the_submitter_when_one_is_given(monkeypatch):
    monkeypatch.delenv("TUNER_OWNER", raising=False)
    assert "@" in owner()
    monkeypatch.setenv("TUNER_OWNER", "ada@laptop")
    assert owner() == "ada@laptop"


def test_heartbeats_land_in_the_store_and_never_take_a_failure_from_the_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv(HEARTBEAT_ENV, "0.05")
    url = default_database_url(tmp_path / "run")
    store = Store(url)
    with Store(url, create=False) as reader:
        eid = store.get_or_create_experiment("beat", spec={}, metric=None, mode=None)
        store.update_experiment(eid, owner="ada@laptop", job_id="tuner-beat-1", job_address="http://head:8265")
        with pytest.raises(TypeError, match=r"unknown field\(s\) \['status'\]"):
            store.update_experiment(eid, status="RUNNING")
        with Heartbeat(store, eid):
            beats: list[float] = []
            done = threading.Event()
            while not done.wait(0.02):  # two different heartbeats seen by another store
                store.flush()
                beat = reader.get_experiment("beat")["heartbeat_at"]
                if beat is not None and beat not in beats:
                    beats.append(beat)
                done.set() if len(beats) >= 2 else None
        row = reader.get_experiment("beat")
    assert (row["owner"], row["job_id"], row["job_address"]) == ("ada@laptop", "tuner-beat-1", "http://head:8265")
    try:
        (tmp_path / "run" / "tuner.db").unlink()  # the store fails: the sweep's next call hears it, not the heartbeat
        failed = threading.Event()
        while not failed.wait(0.01):
            store.beat(eid)
            failed.set() if store.failed else None
        store.beat(eid)
        with pytest.raises(StoreError, match="was removed while in use"):
            store.add_results(eid, [])
    finally:
        store.close()
