"""A resumed sweep's replay: the results stored after the scheduler's last snapshot are told to it
again; a synchronous PBT sync point among them exploits no trial that has already run past it
(its exploit was applied before the interruption), where the controller protocol would refuse it."""

from __future__ import annotations

from typing import Any

import pytest

from schedulers import PopulationBasedTraining
from schedulers.control import SchedulerProtocolError, TrialControl
from schedulers.trial_status import TrialStatus
from tuner.execution.resources import PlacementGroupFactory
from tuner.execution.resume import StoredSweep, replay
from tuner.execution.trial import Trial


class Control(TrialControl):
    """Records what the scheduler asks; every trial has a checkpoint to give."""

    def __init__(self, trials: list[Trial]) -> None:
        self.trials, self.exploits, self.checkpoints = trials, [], []

    def get_trials(self) -> list[Any]:
        return self.trials

    def _stop(self, trial: Any) -> None:
        trial.status = TrialStatus.TERMINATED

    def _checkpoint(self, trial: Any) -> None:
        self.checkpoints.append(trial.trial_id)

    def _has_checkpoint(self, donor: Any) -> bool:
        return True

    def _exploit(self, trial: Any, donor: Any, new_config: dict[str, Any]) -> None:
        self.exploits.append((trial.trial_id, donor.trial_id))

    def _exploit_skipped(self, trial: Any, donor: Any) -> None:
        raise AssertionError("every donor has a checkpoint here")


class Source:
    """The searcher's side of a replay: nothing to search."""

    told_ended: set[str] = set()

    def resume(self, state: Any, told_ended: set[str]) -> None:
        pass

    def result(self, trial_id: str, result: dict[str, Any]) -> None:
        pass

    def ended(self, trial_id: str, result: Any, error: bool = False) -> None:
        pass


def _trial(i: int, status: TrialStatus) -> Trial:
    return Trial(trial_id=f"t{i}", index=i, config={"lr": 0.1 * (i + 1)}, experiment_name="x", trainable_name="T",
                 run_dir="/nonexistent", placement_group_factory=PlacementGroupFactory([{"CPU": 1}]), status=status)


def _sweep(statuses: list[TrialStatus]) -> tuple[StoredSweep, list[Trial]]:
    """Three trials' results at iterations 1 and 2 (the sync point), trial 0 the worst; the
    scheduler never snapshotted (everything is replayed)."""
    trials = [_trial(i, status) for i, status in enumerate(statuses)]
    results = [(t, {"training_iteration": it, "score": float(i + it), "timestamp": float(10 * it + i)})
               for it in (1, 2) for i, t in enumerate(trials)]
    return StoredSweep(trials=trials, scheduler_state=None, searcher_state=None, seen={}, told_ended=set(),
                       replay=results), trials


def _pbt() -> PopulationBasedTraining:
    return PopulationBasedTraining(time_attr="training_iteration", metric="score", mode="max", perturbation_interval=2,
                                   quantile_fraction=0.34, synch=True, seed=0,
                                   hyperparam_mutations={"lr": [0.1, 0.2, 0.3]})


def test_a_replayed_sync_point_leaves_alone_a_trial_that_ran_past_it():
    # the worst trial was exploited before the kill and ran on: stored as PENDING, to be started again
    sweep, trials = _sweep([TrialStatus.PENDING, TrialStatus.PENDING, TrialStatus.PENDING])
    control = Control(trials)
    seen = replay(sweep, control, _pbt(), Source())
    assert control.exploits == []
    assert seen == {"t0": 2, "t1": 2, "t2": 2}
    # outside a replay the same call is a protocol error, as before
    with control.deciding(trials[2]), pytest.raises(SchedulerProtocolError, match=r"exploit_trial\(t0\)"):
        control.exploit_trial(trials[0], trials[2], {"lr": 0.2})


def test_a_replayed_sync_point_still_exploits_a_trial_paused_there():
    # the kill came before the exploit was applied: the worst trial is still paused at the sync point
    sweep, trials = _sweep([TrialStatus.PAUSED, TrialStatus.PAUSED, TrialStatus.PENDING])
    control = Control(trials)
    replay(sweep, control, _pbt(), Source())
    assert control.exploits == [("t0", "t2")]
