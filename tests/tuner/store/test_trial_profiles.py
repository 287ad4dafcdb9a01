"""Per-trial profiles (where each trial's time went) in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from tuner.store import Store

ROW = {"cpus": 1.0, "hold_s": 10.0, "start_s": 1.0, "rollout_start_s": 0.5, "sampling_s": 1.5, "learning_s": 5.0,
       "other_training_s": 0.5, "stop_s": 0.25, "waiting_s": 1.25}


def test_profiles_are_stored_replaced_and_read_back(url):
    with Store(url) as store:
        eid = store.get_or_create_experiment("p", spec={}, metric=None, mode=None)
        other = store.get_or_create_experiment("q", spec={}, metric=None, mode=None)
        store.save_trial_profile(eid, "t0", ROW)
        store.save_trial_profile(eid, "t1", {**ROW, "learning_s": 1.0})
        store.save_trial_profile(other, "t0", {**ROW, "cpus": 2.0})
        store.flush()
        store.save_trial_profile(eid, "t0", {**ROW, "hold_s": 20.0, "waiting_s": 11.25})  # a later, longer life
        profiles = store.trial_profiles(eid)
    assert profiles == {"t0": {**ROW, "hold_s": 20.0, "waiting_s": 11.25}, "t1": {**ROW, "learning_s": 1.0}}
    with Store(url, create=False) as store:
        assert store.trial_profiles(other) == {"t0": {**ROW, "cpus": 2.0}}


def test_a_profile_row_must_have_every_part(url):
    with Store(url) as store:
        eid = store.get_or_create_experiment("p", spec={}, metric=None, mode=None)
        with pytest.raises(ValueError, match="lacks \\['waiting_s'\\]"):
            store.save_trial_profile(eid, "t0", {k: v for k, v in ROW.items() if k != "waiting_s"})
        assert store.trial_profiles(eid) == {}
