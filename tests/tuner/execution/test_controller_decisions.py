"""The controller's decisions with real schedulers, searchers and store, on an in-process backend.

Every trial here is a real TrialActor hosting a real Trainable in this process (see
``fake_backend``): results come back one per pass of the loop, trials taking turns, so each run
makes the same decisions. No Ray, no sleeps.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

import pytest
import ray

from schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining
from schedulers.control import SchedulerProtocolError
from schedulers.simulator import simulate
from schedulers.trial_scheduler import TrialScheduler
from tests.tuner.execution.fake_backend import FakeBackend
from tuner.api import _resources_for
from tuner.run_options import RunOptions
from tuner.execution.controller import Controller
from tuner.errors import StorageFullError
from tuner.execution.profiler import SweepProfiler
from tuner.search.basic_variant import BasicVariantGenerator
from tuner.search.space import grid_search
from tuner.stopper import to_stopper
from tuner.store import Store
from tuner.trainable.trainable import Trainable


class Climb(Trainable):
    """``score`` grows by ``rate`` each step (from the restored value after a restore); with
    ``fail_at`` every step at that iteration raises (``disk_full_at``: as a full disk does)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.score = 0.0

    def step(self) -> dict[str, Any]:
        if self.config.get("fail_at") == self.iteration + 1:
            raise RuntimeError(f"boom at {self.iteration + 1}")
        if self.config.get("disk_full_at") == self.iteration + 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.score += self.config["rate"]
        return {"score": self.score}

    def save_checkpoint(self, checkpoint_dir: str) -> str:
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
            json.dump({"score": self.score}, f)
        return checkpoint_dir

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state.json")) as f:
            self.score = json.load(f)["score"]

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return True


@pytest.fixture(autouse=True)
def no_ray(monkeypatch):
    """Any use of Ray's runtime fails the test (whether or not an earlier test started Ray)."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the controller used Ray with a fake backend")

    for name in ("init", "wait", "get", "kill", "cluster_resources", "available_resources", "nodes"):
        monkeypatch.setattr(ray, name, refuse)


def sweep(tmp_path, param_space: dict[str, Any], *, scheduler: TrialScheduler | None = None,
          stop: Any = None, backend: FakeBackend | None = None, trainable: type[Trainable] | None = None,
          **options: Any):
    """Run a sweep of ``trainable`` (default Climb) as ``tune.run`` builds it (metric ``score``, max),
    on the fake backend: (trials, store rows of the trials, store results by trial id, exploits, backend)."""
    trainable = trainable or Climb
    backend = backend or FakeBackend(cpus=4)
    scheduler = scheduler or FIFOScheduler()
    assert scheduler.set_search_properties("score", "max", config=dict(param_space))
    searcher = BasicVariantGenerator()
    assert searcher.set_search_properties("score", "max", dict(param_space), num_samples=1, seed=0)
    with Store(f"sqlite:///{tmp_path / 'tuner.db'}") as store:
        experiment_id = store.get_or_create_experiment("climb", spec={}, metric="score", mode="max")
        controller = Controller(
            trainable_cls=trainable, experiment_id=experiment_id, experiment_name="climb",
            run_dir=str(tmp_path / "climb"), store=store, searcher=searcher, scheduler=scheduler,
            stopper=to_stopper(stop), resources_for=_resources_for(trainable, None),
            options=RunOptions(metric="score", mode="max", **options),
            profiler=SweepProfiler(total_cpus=backend.cluster_resources()["CPU"]), backend=backend,
        )
        trials = controller.run()
        rows = store.trials(experiment_id)
        results: dict[str, list[dict[str, Any]]] = {}
        for result in store.results(experiment_id):
            results.setdefault(result["trial_id"], []).append(result)
        exploits = store.exploits(experiment_id)
    return trials, rows, results, exploits, backend


def scores(results: list[dict[str, Any]]) -> list[tuple[int, float]]:
    return [(r["training_iteration"], r["score"]) for r in results]


def test_fifo_runs_every_trial_to_its_stop_condition_and_stores_every_result_in_order(tmp_path):
    trials, rows, results, _, backend = sweep(
        tmp_path, {"rate": grid_search([1.0, 2.0, 3.0])}, stop={"training_iteration": 3})
    assert [t.status for t in trials] == ["TERMINATED"] * 3
    assert [r["status"] for r in rows] == ["TERMINATED"] * 3
    for trial, rate in zip(trials, [1.0, 2.0, 3.0]):
        assert trial.config["rate"] == rate
        assert scores(results[trial.trial_id]) == [(1, rate), (2, 2 * rate), (3, 3 * rate)]
        assert trial.last_result is not None and trial.last_result["score"] == 3 * rate
    assert [r["last_result"]["training_iteration"] for r in rows] == [3, 3, 3]
    # one actor per trial, all three in flight at once and taking turns, then all given back
    assert backend.placed == 3 and backend.destroyed == 3
    runs = [actor for actor, method in backend.calls if method == "run"]
    assert runs[:6] == ["actor0", "actor1", "actor2"] * 2
    assert backend.released == {"CPU": 3.0}


def test_fifo_reuses_the_actor_of_an_ended_trial_when_only_one_fits(tmp_path):
    trials, _, results, _, backend = sweep(
        tmp_path, {"rate": grid_search([1.0, 2.0, 3.0])}, stop={"training_iteration": 2},
        backend=FakeBackend(cpus=1))
    assert [t.status for t in trials] == ["TERMINATED"] * 3
    assert all(len(results[t.trial_id]) == 2 for t in trials)
    assert backend.placed == 1  # each next trial took the idle slot of the one before
    assert ("actor0", "stop") in backend.calls  # the ended trial's trainable was cleaned up first


def test_the_cluster_is_asked_for_its_nodes_per_new_placement_group_not_per_trial(tmp_path):
    """Whether a second node joined (the checkpoint keeper's question) costs a call to the
    cluster; a trial that takes over an ended trial's actor and group runs where that group was
    placed, so only a new group asks."""
    trials, _, _, _, backend = sweep(tmp_path, {"rate": grid_search([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])},
                                      stop={"training_iteration": 1}, backend=FakeBackend(cpus=1))
    assert len(trials) == 6 and backend.placed == 1
    assert backend.node_reads <= 3, backend.node_reads  # the loop's start and the one new group, not six


def test_cpu_share_caps_the_cpus_a_sweep_holds_at_once(tmp_path):
    """Half of a 4-CPU cluster: two 1-CPU trials at a time, each next one in the slot of one that
    ended (a sweep sharing the cluster keeps the other half)."""
    trials, _, results, _, backend = sweep(
        tmp_path, {"rate": grid_search([1.0, 2.0, 3.0, 4.0])}, stop={"training_iteration": 2}, cpu_share=0.5)
    assert [t.status for t in trials] == ["TERMINATED"] * 4
    assert all(len(results[t.trial_id]) == 2 for t in trials)
    assert backend.placed == 2 and backend.released == {"CPU": 2.0}
    runs = [actor for actor, method in backend.calls if method == "run"]
    assert set(runs) == {"actor0", "actor1"}


def test_cpu_share_smaller_than_one_trial_still_runs_one(tmp_path):
    trials, _, _, _, backend = sweep(
        tmp_path, {"rate": grid_search([1.0, 2.0])}, stop={"training_iteration": 1}, cpu_share=0.1)
    assert [t.status for t in trials] == ["TERMINATED"] * 2
    assert backend.placed == 1 and backend.released == {"CPU": 1.0}


def test_asha_stops_the_worse_trials_at_the_first_rung(tmp_path):
    asha = ASHAScheduler(time_attr="training_iteration", max_t=4, grace_period=1, reduction_factor=2)
    trials, rows, results, _, _ = sweep(tmp_path, {"rate": grid_search([4.0, 3.0, 2.0, 1.0])}, scheduler=asha)
    iterations = {t.config["rate"]: len(results[t.trial_id]) for t in trials}
    # the best trial reaches the rung first and goes on to max_t; every later one is below the
    # rung's cutoff (the median of what reached it) and is stopped there
    assert iterations == {4.0: 4, 3.0: 1, 2.0: 1, 1.0: 1}
    assert [r["status"] for r in rows] == ["TERMINATED"] * 4
    assert scores(results[trials[0].trial_id]) == [(1, 4.0), (2, 8.0), (3, 12.0), (4, 16.0)]


def test_a_trial_whose_trainable_raises_is_retried_up_to_max_failures_then_errors(tmp_path):
    trials, rows, results, _, backend = sweep(
        tmp_path, {"rate": 1.0, "fail_at": grid_search([2, None])}, stop={"training_iteration": 3},
        max_failures=2)
    failing, healthy = trials
    assert failing.status == "ERROR" and failing.num_failures == 3
    assert "boom at 2" in (failing.error or "")
    assert rows[0]["status"] == "ERROR" and rows[0]["num_failures"] == 3 and "boom at 2" in rows[0]["error"]
    # each retry started over (no checkpoint) and re-ran iteration 1: stored once, decided on once
    assert scores(results[failing.trial_id]) == [(1, 1.0)]
    assert healthy.status == "TERMINATED" and scores(results[healthy.trial_id]) == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert backend.placed == 2  # the failing trial's actor lived on and was given to each retry


def test_a_full_disk_stops_the_sweep_and_reads_the_answers_it_no_longer_wants(tmp_path):
    """The other trial's answer, in flight when the sweep stops, is read rather than dropped (Ray
    prints an error answer freed unread as an "Unhandled error" after the sweep's own line)."""
    backend = FakeBackend(cpus=4)
    with pytest.raises(StorageFullError, match="no space left for the files of trial"):
        sweep(tmp_path, {"rate": 1.0, "disk_full_at": grid_search([2, None])}, stop={"training_iteration": 3},
              backend=backend)
    assert backend.discarded, "the answers in flight were dropped unread"
    assert all(answer.method == "run" for answer in backend.discarded)


def test_a_trial_whose_actor_dies_is_retried_on_a_new_actor(tmp_path):
    deaths: list[str] = []

    def kill_once(actor: str, method: str) -> bool:
        if actor == "actor0" and method == "run" and sum(m == "run" for a, m in backend.calls if a == actor) == 2:
            deaths.append(actor)
            return True
        return False

    backend = FakeBackend(cpus=1, kill_when=kill_once)
    trials, rows, results, _, _ = sweep(
        tmp_path, {"rate": 1.0}, stop={"training_iteration": 3}, max_failures=1, backend=backend)
    (trial,) = trials
    assert deaths == ["actor0"] and trial.num_failures == 1 and "actor0 died" in (trial.error or "")
    assert trial.status == "TERMINATED" and scores(results[trial.trial_id]) == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert backend.placed == 2  # the dead actor's slot was destroyed, not reused


def test_pbt_restores_the_worse_trial_from_the_better_ones_checkpoint_with_a_perturbed_config(tmp_path):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
        resample_probability=0.0, hyperparam_mutations={"rate": [1.0, 2.0, 3.0, 4.0]}, seed=0)
    trials, rows, results, exploits, backend = sweep(
        tmp_path, {"rate": grid_search([1.0, 3.0])}, scheduler=pbt, stop={"training_iteration": 5})
    worse, better = trials
    assert [t.status for t in trials] == ["TERMINATED", "TERMINATED"]
    # At iteration 2 the better trial is asked for a checkpoint (it has none to give yet when the
    # worse one gets there first); at the worse one's next perturbation (iteration 4) it takes it.
    (exploit,) = exploits
    assert (exploit["trial_id"], exploit["donor_trial_id"], exploit["iteration"]) == (worse.trial_id, better.trial_id, 4)
    new_rate = worse.config["rate"]
    assert new_rate in (2.0, 4.0)  # a neighbour of the donor's 3.0 in the mutation's list
    assert exploit["old_config"] == {"rate": 1.0} and exploit["new_config"] == {"rate": new_rate}
    assert exploit["checkpoint_path"] == os.path.join(better.trial_dir, "checkpoint_000002")
    assert rows[0]["config"] == {"rate": new_rate}
    # the worse trial goes on from the donor's state at that checkpoint (score 6: two steps of
    # 3.0) with the new rate, and keeps its own iteration count
    assert scores(results[worse.trial_id]) == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 6.0 + new_rate)]
    assert scores(results[better.trial_id]) == [(i, 3.0 * i) for i in range(1, 6)]
    assert backend.calls.index(("actor1", "save")) < backend.calls.index(("actor0", "exploit"))


def test_synchronous_pbt_pauses_both_trials_then_resumes_them_from_checkpoints_one_exploited(tmp_path):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
        resample_probability=0.0, hyperparam_mutations={"rate": [1.0, 2.0, 3.0, 4.0]}, synch=True, seed=0)
    trials, rows, results, exploits, backend = sweep(
        tmp_path, {"rate": grid_search([1.0, 3.0])}, scheduler=pbt, stop={"training_iteration": 4})
    worse, better = trials
    assert [t.status for t in trials] == ["TERMINATED", "TERMINATED"]
    # both pause at the perturbation (a save each, their slots given back) before either goes on
    assert backend.calls[:6] == [("actor0", "run"), ("actor1", "run")] * 2 + [("actor0", "save"), ("actor1", "save")]
    (exploit,) = exploits
    assert (exploit["trial_id"], exploit["donor_trial_id"], exploit["iteration"]) == (worse.trial_id, better.trial_id, 2)
    assert exploit["checkpoint_path"] == os.path.join(better.trial_dir, "checkpoint_000002")
    new_rate = worse.config["rate"]
    assert new_rate in (2.0, 4.0) and rows[0]["config"] == {"rate": new_rate}
    # resumed on fresh trainables: the worse from the donor's checkpoint with the new rate, the
    # better from its own
    assert scores(results[worse.trial_id]) == [(1, 1.0), (2, 2.0), (3, 6.0 + new_rate), (4, 6.0 + 2 * new_rate)]
    assert scores(results[better.trial_id]) == [(i, 3.0 * i) for i in range(1, 5)]
    # the paused trials' actors waited for them: no new process for a resume
    assert backend.placed == 2 and backend.destroyed == 2


def test_synchronous_pbt_exploits_a_donor_whose_pause_save_is_still_under_way(tmp_path):
    """The better trial reaches the sync point first and is being paused when the worse one
    completes the population: its pause save is the donor's checkpoint, waited for, not skipped."""
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
        resample_probability=0.0, hyperparam_mutations={"rate": [1.0, 2.0, 3.0, 4.0]}, synch=True, seed=0)
    trials, rows, results, exploits, backend = sweep(
        tmp_path, {"rate": grid_search([3.0, 1.0])}, scheduler=pbt, stop={"training_iteration": 4})
    better, worse = trials
    # the worse trial's result is decided while the better one's pause save is in flight
    assert backend.calls[:5] == [("actor0", "run"), ("actor1", "run"), ("actor0", "run"), ("actor1", "run"),
                                 ("actor0", "save")]
    (exploit,) = exploits
    assert (exploit["trial_id"], exploit["donor_trial_id"], exploit["iteration"]) == (worse.trial_id, better.trial_id, 2)
    assert exploit["checkpoint_path"] == os.path.join(better.trial_dir, "checkpoint_000002")
    new_rate = worse.config["rate"]
    assert new_rate in (2.0, 4.0)
    assert scores(results[worse.trial_id]) == [(1, 1.0), (2, 2.0), (3, 6.0 + new_rate), (4, 6.0 + 2 * new_rate)]
    assert [t.status for t in trials] == ["TERMINATED", "TERMINATED"]


def never_checkpoints(config: dict[str, Any]) -> None:
    from tuner import tune

    for i in range(4):
        tune.report({"score": config["rate"] * (i + 1)})


class ExploitsTheOtherRunningTrial(FIFOScheduler):
    """Asks each trial to PAUSE at iteration 2 and, at the second one's, exploits the first: a
    function that never checkpoints cannot pause, so the first is still RUNNING (PBT's synch mode)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bool] = []

    def on_trial_result(self, controller: Any, trial: Any, result: Any) -> str:
        if result["training_iteration"] != 2:
            return self.CONTINUE
        others = [t for t in controller.get_trials() if t is not trial and t.status == "RUNNING"]
        if others:
            self.answers.append(controller.exploit_trial(others[0], trial, dict(others[0].config)))
        return self.PAUSE


def test_a_trial_that_could_not_pause_may_be_exploited_and_a_donor_without_a_checkpoint_gives_nothing(tmp_path):
    from tuner.trainable.function_trainable import wrap_function

    scheduler = ExploitsTheOtherRunningTrial()
    trials, *_ = sweep(tmp_path, {"rate": grid_search([1.0, 3.0])}, scheduler=scheduler,
                       trainable=wrap_function(never_checkpoints))
    assert scheduler.answers == [False]  # asked of a running trial: no protocol error; no donor checkpoint: skipped
    assert [t.status for t in trials] == ["TERMINATED", "TERMINATED"]


# -- the protocol's rules, one implementation for the controller and the simulator ----------------
class StopsItself(FIFOScheduler):
    def on_trial_result(self, controller: Any, trial: Any, result: Any) -> str:
        controller.stop_trial(trial)  # the rule: answer STOP instead
        return self.CONTINUE


class CheckpointsAnother(FIFOScheduler):
    def on_trial_result(self, controller: Any, trial: Any, result: Any) -> str:
        controller.checkpoint_trial(next(t for t in controller.get_trials() if t is not trial))
        return self.CONTINUE


class ExploitsARunningTrial(FIFOScheduler):
    def on_trial_result(self, controller: Any, trial: Any, result: Any) -> str:
        other = next(t for t in controller.get_trials() if t is not trial)
        controller.exploit_trial(other, trial, dict(other.config))  # neither decided nor PAUSED
        return self.CONTINUE


@pytest.mark.parametrize("scheduler_cls, call", [(StopsItself, "stop_trial"), (CheckpointsAnother, "checkpoint_trial"),
                                                 (ExploitsARunningTrial, "exploit_trial")])
def test_a_scheduler_that_breaks_the_protocol_fails_the_same_way_in_a_sweep_and_in_the_simulator(
        tmp_path, scheduler_cls, call):
    with pytest.raises(SchedulerProtocolError, match=f"^{call}\\(") as simulated:
        simulate(scheduler_cls(), {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]}, n_slots=2, metric="score")
    with pytest.raises(SchedulerProtocolError, match=f"^{call}\\(") as swept:
        sweep(tmp_path, {"rate": grid_search([1.0, 2.0])}, scheduler=scheduler_cls(), stop={"training_iteration": 3})
    assert str(swept.value).split(": ", 1)[1] == str(simulated.value).split(": ", 1)[1]
