"""ResourceChangingScheduler and its allocation functions: the maths on fake cluster numbers (and
against Ray Tune's own implementation on the same numbers), delegation to the base scheduler, the
state round trip, and every bad argument."""

from __future__ import annotations

import dataclasses
import pickle
import random
from typing import Any

import pytest

from schedulers import (
    ASHAScheduler,
    DistributeResources,
    DistributeResourcesToTopJob,
    FIFOScheduler,
    ResourceChangingScheduler,
    TrialScheduler,
)
from schedulers.resource_changing import RESOURCES_IN_PLACE, RESOURCES_ON_RESTART, RESOURCES_REFUSED, bundles_of
from schedulers.trial_status import TrialStatus


class PGF:
    """A stand-in for the controller's PlacementGroupFactory: what the scheduler reads of it."""

    def __init__(self, bundles: list[dict[str, float]]) -> None:
        self.bundles = [dict(b) for b in bundles]


@dataclasses.dataclass(eq=False)
class FakeTrial:
    trial_id: str
    placement_group_factory: PGF
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    status: TrialStatus = TrialStatus.RUNNING
    last_result: dict[str, Any] | None = None
    checkpoint_path: str | None = None


class FakeController:
    """A controller with fixed cluster numbers that applies every change in place (or answers
    ``answer``), and records the changes asked for."""

    def __init__(self, cpus: float, trials: list[FakeTrial], gpus: float = 0.0, answer: str = RESOURCES_IN_PLACE):
        self.cpus, self.gpus, self.trials, self.answer = cpus, gpus, trials, answer
        self.changes: list[tuple[str, list[dict[str, float]]]] = []

    def get_trials(self):
        return list(self.trials)

    def get_live_trials(self):
        return [t for t in self.trials if t.status not in (TrialStatus.TERMINATED, TrialStatus.ERROR)]

    def cluster_resources(self):
        return {"CPU": self.cpus, "GPU": self.gpus}

    def set_trial_resources(self, trial, bundles):
        self.changes.append((trial.trial_id, bundles))
        if self.answer == RESOURCES_IN_PLACE:
            trial.placement_group_factory = PGF(bundles)
        return self.answer

    def stop_trial(self, trial):
        trial.status = TrialStatus.TERMINATED

    def exploit_trial(self, trial, donor, new_config):
        return False

    def checkpoint_trial(self, trial):
        pass


LEARNER, WORKER = {"CPU": 1.0}, {"CPU": 0.5}
BASE = [LEARNER, WORKER, WORKER]  # a trainer with 2 rollout actors: 2 CPUs


def trainer_trials(n: int) -> list[FakeTrial]:
    return [FakeTrial(f"t{i}", PGF(BASE)) for i in range(n)]


def scheduler_for(trials, fn=None, base=None):
    s = ResourceChangingScheduler(base, fn if fn is not None else DistributeResources(add_bundles=True))
    s.set_search_properties("score", "max")
    controller = FakeController(16, trials)
    for t in trials:
        s.on_trial_add(controller, t)
    return s, controller


def result(it: int, score: float = 0.0) -> dict[str, Any]:
    return {"training_iteration": it, "score": score}


# -- allocation maths -------------------------------------------------------------------------------
def test_stopped_trials_cpus_go_to_the_survivors_evenly():
    trials = trainer_trials(8)  # 8 x 2 CPUs = all 16
    s, c = scheduler_for(trials)
    assert s.on_trial_result(c, trials[0], result(1)) == TrialScheduler.CONTINUE
    assert c.changes == []  # nothing is free
    for t in trials[3:]:  # 5 stopped: 10 CPUs free, 3 survivors
        t.status = TrialStatus.TERMINATED
    for t in trials[:3]:
        assert s.on_trial_result(c, t, result(2)) == TrialScheduler.CONTINUE
    # The 10 free CPUs are 20 units of one 0.5-CPU bundle, dealt round robin: 7, 7 and 6 extra bundles.
    assert [len(t.placement_group_factory.bundles) for t in trials[:3]] == [10, 10, 9]
    assert all(b == WORKER for t in trials[:3] for b in t.placement_group_factory.bundles[1:])
    assert sum(sum(b["CPU"] for b in t.placement_group_factory.bundles) for t in trials[:3]) == 16.0


def test_a_grown_trial_shrinks_when_new_trials_come():
    trials = trainer_trials(2)
    s, c = scheduler_for(trials)
    for t in trials:
        s.on_trial_result(c, t, result(1))
    assert [len(t.placement_group_factory.bundles) for t in trials] == [3 + 12, 3 + 12]  # 16 CPUs, 2 trials
    newcomers = trainer_trials(4)[2:]
    for t in newcomers:
        t.status = TrialStatus.PENDING
        c.trials.append(t)
        s.on_trial_add(c, t)
    s.on_trial_result(c, trials[0], result(2))
    # 4 live trials hold 8 + 2 x 2 = 12 CPUs over 16: trial 0 must give back, down to its even share.
    held = sum(sum(b["CPU"] for b in t.placement_group_factory.bundles) for t in c.get_live_trials())
    assert held <= 16.0
    assert 3 <= len(trials[0].placement_group_factory.bundles) < 15


def test_increase_by_times_caps_and_reserve_resources_hold_back():
    trials = trainer_trials(1)
    s, c = scheduler_for(trials, DistributeResources(add_bundles=True, increase_by={"CPU": 1}, increase_by_times=3))
    s.on_trial_result(c, trials[0], result(1))
    assert trials[0].placement_group_factory.bundles == BASE + [{"CPU": 1.0}] * 3
    trials = trainer_trials(1)
    s, c = scheduler_for(trials, DistributeResources(add_bundles=True, reserve_resources={"CPU": 10}))
    s.on_trial_result(c, trials[0], result(1))
    assert sum(b["CPU"] for b in trials[0].placement_group_factory.bundles) == 6.0  # 16 - 10 reserved


def test_one_bundle_trials_grow_their_bundle():
    trials = [FakeTrial(f"t{i}", PGF([{"CPU": 1.0}])) for i in range(4)]
    s, c = scheduler_for(trials, DistributeResources())
    s.on_trial_result(c, trials[0], result(1))
    assert trials[0].placement_group_factory.bundles == [{"CPU": 4.0}]  # 16 / 4


def test_no_change_before_the_first_iteration_nor_when_equal():
    trials = trainer_trials(8)
    s, c = scheduler_for(trials)
    s.on_trial_result(c, trials[0], result(0))
    s.on_trial_result(c, trials[0], result(1))
    assert c.changes == []


def test_top_job_gets_every_free_unit():
    trials = trainer_trials(4)  # 8 CPUs of 16 used
    s, c = scheduler_for(trials, DistributeResourcesToTopJob(add_bundles=True))
    for i, t in enumerate(trials):
        t.last_result = result(1, score=float(i))
    s.on_trial_result(c, trials[0], result(1, 0.0))
    assert c.changes == []  # not the best
    s.on_trial_result(c, trials[3], result(1, 3.0))
    assert len(trials[3].placement_group_factory.bundles) == 3 + 16  # all 8 free CPUs


def test_matches_ray_tunes_own_allocation_on_the_same_numbers():
    """Random clusters, trial counts and allocations: the same bundles as Ray Tune's code."""
    from ray.tune.execution.placement_groups import PlacementGroupFactory as RayPGF
    from ray.tune.schedulers import resource_changing_scheduler as ray_rcs

    rng = random.Random(3)
    for case in range(200):
        add_bundles = rng.random() < 0.7
        base = BASE if add_bundles else [{"CPU": rng.choice([1.0, 2.0])}]
        kwargs = dict(add_bundles=add_bundles,
                      increase_by=rng.choice([None, {"CPU": 1.0}, {"CPU": 0.5}]),
                      increase_by_times=rng.choice([-1, 2, 5]),
                      reserve_resources=rng.choice([None, {"CPU": 2.0}]))
        cpus = float(rng.randint(4, 40))
        n = rng.randint(1, 6)
        trials = []
        for i in range(n):  # each holds the base plus some units (maybe more than fits: shrink)
            extra = rng.randint(0, 6)
            bundles = [dict(b) for b in base] + ([dict(WORKER)] * extra if add_bundles else [])
            if not add_bundles:
                bundles[0]["CPU"] += extra
            trials.append(FakeTrial(f"t{i}", PGF(bundles)))
        ours = DistributeResources(**kwargs)
        theirs = ray_rcs.DistributeResources(**kwargs)

        class Ours:
            base_trial_resources = [dict(b) for b in base]

        class Theirs:
            base_trial_resources = RayPGF([dict(b) for b in base])

        @dataclasses.dataclass
        class RayTrial:
            trial_id: str
            placement_group_factory: Any

        class Updater:
            def __init__(self, cpus: float) -> None:
                self.cpus = cpus

            def get_num_cpus(self):
                return self.cpus

            def get_num_gpus(self):
                return 0

        class RayController:
            def __init__(self, cpus: float, trials: list[FakeTrial]) -> None:
                self._resource_updater = Updater(cpus)
                self.live = [RayTrial(t.trial_id, RayPGF(t.placement_group_factory.bundles)) for t in trials]

            def get_live_trials(self):
                return self.live

        controller = FakeController(cpus, trials)
        which = rng.randrange(n)
        got = ours(controller, trials[which], result(1), Ours())
        ray_controller = RayController(cpus, trials)
        want = theirs(ray_controller, ray_controller.live[which], result(1), Theirs())
        clean = [{k: v for k, v in b.items() if v} for b in want.bundles]
        assert [{k: v for k, v in b.items() if v} for b in got] == clean, (case, kwargs, cpus, n)


# -- delegation, decisions, state -------------------------------------------------------------------
def test_every_decision_is_the_base_schedulers():
    trials = trainer_trials(3)
    asha = ASHAScheduler(time_attr="training_iteration", grace_period=1, reduction_factor=3, max_t=9)
    s, c = scheduler_for(trials, base=asha)
    assert s.metric == "score" and s.mode == "max"
    scores = {"t0": 3.0, "t1": 1.0, "t2": 0.5}
    decisions = [s.on_trial_result(c, t, result(1, scores[t.trial_id])) for t in trials]
    assert decisions == [TrialScheduler.CONTINUE, TrialScheduler.STOP, TrialScheduler.STOP]
    assert c.changes and all(tid == "t0" for tid, _ in c.changes)  # only a continuing trial is resized


def test_a_trial_that_cannot_change_in_place_is_paused_or_left_alone():
    trials = trainer_trials(2)
    s, c = scheduler_for(trials)
    c.answer = RESOURCES_ON_RESTART
    assert s.on_trial_result(c, trials[0], result(1)) == TrialScheduler.PAUSE
    c.answer = RESOURCES_REFUSED
    assert s.on_trial_result(c, trials[1], result(1)) == TrialScheduler.CONTINUE


def test_a_controller_that_cannot_change_resources_gets_the_base_decisions_only():
    from schedulers.simulator import simulate

    res = simulate(ResourceChangingScheduler(FIFOScheduler()), lambda cfg, t: float(t), [{}] * 3,
                   metric="score", mode="max", max_iterations=3)
    assert all(d == TrialScheduler.CONTINUE for _, _, d in res.decisions)


def test_state_round_trip():
    trials = trainer_trials(4)
    asha = ASHAScheduler(time_attr="training_iteration", grace_period=1, reduction_factor=2, max_t=8)
    s, c = scheduler_for(trials, base=asha)
    for t in trials[:2]:
        s.on_trial_result(c, t, result(1, 1.0))
    state = pickle.loads(pickle.dumps(s.state_dict()))
    fresh = ResourceChangingScheduler(ASHAScheduler(time_attr="training_iteration", grace_period=1,
                                                    reduction_factor=2, max_t=8),
                                      DistributeResources(add_bundles=True))
    fresh.load_state_dict(state)
    assert fresh.state_dict() == s.state_dict()
    assert fresh.base_trial_resources == BASE
    later = [t for t in trials[2:]]
    assert [fresh.on_trial_result(c, t, result(1, 0.0)) for t in later] == \
        [s.on_trial_result(c, t, result(1, 0.0)) for t in later]


def test_trials_must_share_their_base_request():
    s = ResourceChangingScheduler(None, DistributeResources(add_bundles=True))
    c = FakeController(16, [])
    s.on_trial_add(c, FakeTrial("a", PGF(BASE)))
    with pytest.raises(ValueError, match="same resources"):
        s.on_trial_add(c, FakeTrial("b", PGF([LEARNER])))


def test_add_bundles_false_refuses_a_trainer_before_it_runs():
    s = ResourceChangingScheduler(None, DistributeResources(add_bundles=False))
    with pytest.raises(ValueError, match="add_bundles=True"):
        s.on_trial_add(FakeController(16, []), FakeTrial("a", PGF(BASE)))


def test_the_default_allocation_grows_a_trainer_by_bundles_and_a_one_bundle_trial_in_its_bundle():
    """A ported Ray Tune script's `ResourceChangingScheduler(base_scheduler=...)`: the default
    allocation (Ray Tune's would refuse a request of several bundles) gives a trainer more rollout
    actors, and a one-bundle trial a bigger bundle, as add_bundles=True and False would."""
    for base, explicit in ((BASE, True), ([LEARNER], False)):
        default, given = ResourceChangingScheduler(None), ResourceChangingScheduler(
            None, DistributeResources(add_bundles=explicit))
        answers = []
        for s in (default, given):
            c = FakeController(16, [])
            trial = FakeTrial("a", PGF(base))
            c.trials.append(trial)
            s.on_trial_add(c, trial)
            answers.append(s.reallocate_trial_resources_if_needed(c, trial, result(1, 0.0)))
        assert answers[0] is not None and bundles_of(answers[0]) == bundles_of(answers[1])
        assert len(bundles_of(answers[0])) > 1 if explicit else len(bundles_of(answers[0])) == 1


@pytest.mark.parametrize("kwargs, field", [
    (dict(base_scheduler="asha"), "base_scheduler"),
    (dict(base_scheduler=ResourceChangingScheduler()), "base_scheduler"),
    (dict(resources_allocation_function=3), "resources_allocation_function"),
])
def test_bad_scheduler_arguments(kwargs, field):
    with pytest.raises(ValueError, match=f"ResourceChangingScheduler: {field} must be"):
        ResourceChangingScheduler(**kwargs)


@pytest.mark.parametrize("cls", [DistributeResources, DistributeResourcesToTopJob])
@pytest.mark.parametrize("kwargs, field", [
    (dict(add_bundles=1), "add_bundles"),
    (dict(increase_by={"CPU": -1}), "increase_by"),
    (dict(increase_by={"cpus": 1}), "increase_by"),
    (dict(increase_by={"CPU": 0}), "increase_by"),
    (dict(increase_by=[1]), "increase_by"),
    (dict(increase_by_times=1.5), "increase_by_times"),
    (dict(reserve_resources={"TPU": 1}), "reserve_resources"),
    (dict(reserve_resources={"CPU": float("nan")}), "reserve_resources"),
])
def test_bad_allocation_arguments(cls, kwargs, field):
    with pytest.raises(ValueError, match=f"{cls.__name__}: {field} must be"):
        cls(**kwargs)


def test_bad_top_job_arguments():
    with pytest.raises(ValueError, match="DistributeResourcesToTopJob: mode must be"):
        DistributeResourcesToTopJob(mode="best")
    with pytest.raises(ValueError, match="DistributeResourcesToTopJob: metric must be"):
        DistributeResourcesToTopJob(metric="")
