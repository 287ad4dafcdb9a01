"""Which trials run packed (tuner/execution/pack_plan.py): "auto" packs configs the trainer can pack
when the planned trials outnumber the learners the cluster runs side by side, and says once how
or why not; an int packs or fails naming pack_trials; False never packs."""

from __future__ import annotations

import pytest

from tuner import tune
from tuner.execution.pack_backend import MemberPlacement
from tuner.execution.pack_plan import AUTO_MAX, PackPlan
from tuner.execution.resources import PlacementGroupFactory
from tuner.trainable.trainable import Trainable

LEARNER = PlacementGroupFactory([{"CPU": 1.0}])


class Packable(Trainable):
    """Packs configs whose "shape" is a number; refuses the others."""

    @classmethod
    def pack_signature(cls, config):
        if not isinstance(config.get("shape"), int):
            return None, "its shape is not a number"
        return config["shape"], "one population learner a pack"

    @classmethod
    def pack_shape_keys(cls):
        return ("shape",)

    @classmethod
    def packed_trainable(cls):
        return cls


def _plan(pack_trials, planned=32, cpus=2.0, space=None, cluster=None, learner=LEARNER):
    said: list[str] = []
    plan = PackPlan(Packable, pack_trials, planned, lambda config: learner, cluster=lambda: cluster or {"CPU": cpus},
                    say=said.append, space=space)
    return plan, said


def test_auto_spreads_the_planned_trials_over_the_learners_side_by_side_and_says_so_once():
    plan, said = _plan("auto", planned=32, cpus=2.0)
    placements = [plan({"shape": 1, "lr": lr}) for lr in (1e-3, 3e-3)]
    assert all(isinstance(p, MemberPlacement) and p.capacity == 16 for p in placements)
    assert placements[0].key() == placements[1].key() and placements[0].required() == {"CPU": 1 / 16}
    assert plan({"shape": 2}).key() != placements[0].key()  # another shape: another pack
    assert said == ["pack_trials='auto': trials of Packable run packed, up to 16 to a process "
                    "(one population learner a pack)"]


def test_auto_counts_a_gpu_learners_room_by_the_clusters_gpus():
    on_gpu = PlacementGroupFactory([{"CPU": 1.0, "GPU": 1.0}])
    plan, said = _plan("auto", planned=16, cluster={"CPU": 16.0, "GPU": 1.0}, learner=on_gpu)
    placement = plan({"shape": 1})  # CPUs for 16 learners side by side, a GPU for one: 16 to a pack
    assert isinstance(placement, MemberPlacement) and placement.capacity == 16
    assert placement.required() == {"CPU": 1 / 16, "GPU": 1 / 16} and placement.pack.bundles == on_gpu.bundles
    plan, said = _plan("auto", planned=16, cluster={"CPU": 16.0, "GPU": 8.0}, learner=on_gpu)
    assert plan({"shape": 1}).capacity == 2


def test_auto_leaves_trials_unpacked_when_each_has_a_learner_or_cannot_pack_and_says_why():
    plan, said = _plan("auto", planned=2, cpus=2.0)
    assert plan({"shape": 1}) is LEARNER
    plan, said_too = _plan("auto", planned=None, cpus=1.0)
    assert plan({"shape": "big"}) is LEARNER and plan({"shape": "big"}) is LEARNER
    assert said_too == ["pack_trials='auto': trials of Packable run one per process: its shape is not a number"]
    assert isinstance(plan({"shape": 1}), MemberPlacement) and plan({"shape": 1}).capacity == AUTO_MAX


def test_auto_leaves_a_search_over_a_shape_key_unpacked_and_an_int_packs_it():
    space = {"shape": tune.grid_search([1, 2]), "lr": tune.loguniform(1e-4, 1e-2)}
    plan, said = _plan("auto", space=space)
    assert plan({"shape": 1}) is LEARNER
    assert said == ["pack_trials='auto': trials of Packable run one per process: the search varies shape: keys "
                    "that fix a pack's shape (pack_trials=N packs the trials that match)"]
    plan, _ = _plan(4, space=space)
    assert plan({"shape": 1}).capacity == 4


def test_false_or_one_never_packs_and_a_forced_pack_that_cannot_is_one_error():
    for value in (False, 1):
        plan, said = _plan(value)
        assert plan({"shape": 1}) is LEARNER and said == []
    plan, _ = _plan(4)
    with pytest.raises(ValueError, match=r"^pack_trials=4: trials of Packable cannot be packed: its shape is not"):
        plan({"shape": "big"})


def test_auto_leaves_a_define_by_run_search_unpacked_and_says_why_and_an_order_packs_it():
    said: list[str] = []
    plan = PackPlan(Packable, "auto", 32, lambda config: LEARNER, cluster=lambda: {"CPU": 2.0}, say=said.append, define_by_run=True)
    assert plan({"shape": 1}) is LEARNER and plan({"shape": 1}) is LEARNER
    assert said == ["pack_trials='auto': trials of Packable run one per process: the searcher suggests its space trial "
                    "by trial, so it may vary keys that fix a pack's shape (pack_trials=N packs the trials that match)"]
    plan = PackPlan(Packable, 4, 32, lambda config: LEARNER, cluster=lambda: {"CPU": 2.0}, say=said.append, define_by_run=True)
    assert isinstance(plan({"shape": 1}), MemberPlacement)
