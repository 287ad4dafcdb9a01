"""The packed arguments of hot actor calls: what packs, what falls back to Ray's own path."""

from __future__ import annotations

import pickle

import pytest

from tuner import tune
from tuner.execution.packed_call import pack, unpack
from tuner.trainable.context import TrialInfo


def test_round_trip_keeps_every_argument():
    info = TrialInfo("t_00001", "train_t_00001", "/tmp/run/t_00001", "exp", 1, ({"CPU": 1.0},))
    kwargs = {"max_results": 100, "window_s": 0.005, "config": {"lr": 1e-3, "net": [64, 64]}, "info": info}
    assert unpack(pack(kwargs)) == kwargs


def test_objects_defined_in_a_test_travel_by_value():
    class Local:  # not importable by name: the standard pickler would refuse it
        def __init__(self, value):
            self.value = value

    payload = pack({"config": {"obj": Local(3), "fn": lambda x: x + 1}})
    assert payload is not None
    config = unpack(payload)["config"]
    assert config["obj"].value == 3 and config["fn"](1) == 2


def test_ray_references_fall_back_to_rays_path(ray_session):
    ref = ray_session.put(41)

    @ray_session.remote
    class Holder:
        pass

    assert pack({"config": {"nested": [ref]}}) is None
    assert pack({"config": {"actor": Holder.remote()}}) is None


def test_unpack_rejects_what_pack_did_not_make():
    with pytest.raises(TypeError, match="dict of keyword arguments"):
        unpack(pickle.dumps([1, 2]))


def _read_ref(config):
    import ray

    tune.report({"value": ray.get(config["ref"]) + config["i"]})


def test_trials_on_a_reused_actor_get_object_refs_in_their_config(ray_session, tmp_path):
    """A reused actor gets its trials' arguments packed, except when a config holds an ObjectRef:
    that trial goes through Ray's path, so Ray keeps the object alive and the trial reads it."""
    ref = ray_session.put(100)
    analysis = tune.run(
        _read_ref,
        config={"ref": ref, "i": tune.grid_search([1, 2, 3])},
        max_concurrent_trials=1,
        metric="value",
        mode="max",
        storage_path=str(tmp_path),
        name="refs",
        verbose=0,
        tensorboard=False,
    )
    assert sorted(t.last_result["value"] for t in analysis.trials) == [101, 102, 103]
