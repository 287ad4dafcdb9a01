"""Reading a stored sweep back so that a new driver process can continue it.

The controller writes one snapshot (scheduler state, searcher state, and ``seen``: the last
iteration of each trial that its decisions were made on) in one transaction, at every trial
it adds and every couple of seconds. Status changes are queued before the result rows and the
snapshot that follow them, so whatever a committed snapshot saw was acted on durably. On
resume, stored results past ``seen`` are replayed into the scheduler and searcher; trials that
were running start again from their last checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from typing import Any, Callable

from schedulers.control import TrialControl
from schedulers.trial_scheduler import TrialScheduler
from schedulers.trial_status import ENDED, TrialStatus
from tuner.execution.checkpoint_manager import CheckpointManager
from tuner.execution.resources import PlacementGroupFactory
from tuner.execution.trial import Trial
from tuner.execution.trial_source import TrialSource
from tuner.flatten import flat_result
from tuner.store import Store

logger = logging.getLogger(__name__)

#: "ERRORED_ONLY" also retries failed trials from their last checkpoint; "RESTART_ERRORED" retries
#: them from scratch (their checkpoints and stored results are dropped).
RESUME_MODES = (True, False, "AUTO", "ERRORED_ONLY", "RESTART_ERRORED")


@dataclasses.dataclass
class StoredSweep:
    """What a resumed controller starts from."""

    trials: list[Trial]
    scheduler_state: dict[str, Any] | None
    searcher_state: dict[str, Any] | None
    seen: dict[str, int]
    told_ended: set[str]
    #: (trial, result) stored after the snapshot, in the order they were reported.
    replay: list[tuple[Trial, dict[str, Any]]]
    #: Failed trials that start again from scratch (``restart_errored``).
    restarted: list[str] = dataclasses.field(default_factory=list)


def validate_resume(resume: Any) -> Any:
    if resume not in RESUME_MODES or isinstance(resume, int) and not isinstance(resume, bool):
        raise ValueError(f"resume must be one of {list(RESUME_MODES)}, got {resume!r}")
    return resume


def _state(store: Store, experiment_id: int, key: str) -> Any:
    blob = store.load_state(experiment_id, key)
    return pickle.loads(blob) if blob is not None else None


def load_sweep(
    store: Store,
    experiment_id: int,
    *,
    experiment_name: str,
    trainable_name: str,
    run_dir: str,
    resources_for: Callable[[dict[str, Any]], PlacementGroupFactory],
    retry_errored: bool,
    restart_errored: bool = False,
) -> StoredSweep:
    """The stored trials (interrupted ones set back to PENDING) and the last snapshot.

    With ``restart_errored`` failed trials start again from scratch: their stored results are
    deleted here and they lose their checkpoint (the caller deletes its files).
    """
    meta = _state(store, experiment_id, "controller") or {}
    seen: dict[str, int] = dict(meta.get("seen", {}))
    trials: list[Trial] = []
    restarted: list[str] = []
    for row in store.trials(experiment_id):
        config = pickle.loads(row["config_blob"]) if row.get("config_blob") else row["config"]
        status = TrialStatus(row["status"])
        if status in (TrialStatus.RUNNING, TrialStatus.INTERRUPTED):  # RUNNING: its driver was killed (SIGKILL, a lost node)
            status = TrialStatus.PENDING  # it starts again from its last checkpoint
        num_failures = int(row.get("num_failures") or 0)
        if status == TrialStatus.ERROR and restart_errored:
            restarted.append(row["trial_id"])
            store.delete_results(experiment_id, row["trial_id"])
            store.update_trial(row["trial_id"], checkpoint_path=None, last_result=None)
            row = {**row, "checkpoint_path": None, "last_result": None}
            seen.pop(row["trial_id"], None)
        if status == TrialStatus.ERROR and retry_errored:
            status, num_failures = TrialStatus.PENDING, 0
        trial = Trial(
            trial_id=row["trial_id"],
            index=int(row["trial_index"]),
            config=config,
            experiment_name=experiment_name,
            trainable_name=trainable_name,
            run_dir=run_dir,
            placement_group_factory=resources_for(config),
            status=status,
            last_result=row.get("last_result") or None,
            num_failures=num_failures,
            error=row.get("error"),
            checkpoint_path=row.get("checkpoint_path"),
        )
        trials.append(trial)
    by_id: dict[str | None, Trial] = {t.trial_id: t for t in trials}
    results = store.results(experiment_id)
    _restore_own_progress(trials, store.exploits(experiment_id), results)
    replay = []
    for result in results:
        owner = by_id.get(result.get("trial_id"))
        if owner is None:
            continue
        if owner.last_result is None or result["training_iteration"] >= owner.iteration:
            owner.last_result = result  # the latest stored result is the trial's last one
        if result["training_iteration"] > seen.get(owner.trial_id, 0):
            replay.append((owner, result))
    replay.sort(key=lambda item: item[1].get("timestamp", 0.0))
    return StoredSweep(
        trials=trials,
        scheduler_state=_state(store, experiment_id, "scheduler"),
        searcher_state=_state(store, experiment_id, "searcher"),
        seen=seen,
        told_ended=set(meta.get("told_ended", ())),
        replay=replay,
        restarted=restarted,
    )


def _restore_own_progress(trials: list[Trial], exploits: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    """A trial whose checkpoint on record is still the donor's of its last exploit goes on from
    its own iteration (and time) when restored from it, as it would have without the kill."""
    last: dict[str, dict[str, Any]] = {}
    for row in exploits:  # oldest first: the last one per trial wins
        last[row["trial_id"]] = row
    last = {tid: row for tid, row in last.items() if row["donor_trial_id"] != tid}  # its own checkpoint: its own counters
    holding = {t.trial_id: int(last[t.trial_id]["iteration"]) for t in trials
               if t.trial_id in last and t.checkpoint_path and last[t.trial_id]["checkpoint_path"] == t.checkpoint_path}
    times = {result["trial_id"]: float(result.get("time_total_s", 0.0)) for result in results
             if holding.get(str(result.get("trial_id"))) == result["training_iteration"]}
    for trial in trials:
        if trial.trial_id in holding:
            trial.own_progress = (holding[trial.trial_id], times.get(trial.trial_id, 0.0))


__all__ = ["RESUME_MODES", "StoredSweep", "load_sweep", "validate_resume"]


def replay(sweep: StoredSweep, control: TrialControl, scheduler: TrialScheduler, source: TrialSource) -> dict[str, int]:
    """Bring the scheduler and searcher of a resumed sweep up to date: their stored state, the
    results stored after it, and the ends of trials they were not told of. Returns ``seen`` (the
    last iteration of each trial that decisions were made on)."""
    seen = dict(sweep.seen)
    source.resume(sweep.searcher_state, sweep.told_ended)
    if sweep.scheduler_state is not None:
        scheduler.load_state_dict(sweep.scheduler_state)
    else:
        for trial in sweep.trials:
            scheduler.on_trial_add(control, trial)
    with control.replaying():
        for trial, result in sweep.replay:
            trial.last_flat_result = flat = flat_result(result)
            # Decisions on these results were acted on before the interruption, or are taken
            # again when the interrupted trial gets there: only the data matters here.
            source.result(trial.trial_id, flat)
            with control.deciding(trial):
                scheduler.on_trial_result(control, trial, flat)
            seen[trial.trial_id] = int(result["training_iteration"])
    for trial in sweep.trials:
        if trial.last_result and trial.last_flat_result is None:
            trial.last_flat_result = trial.last_result
        if trial.status in ENDED and trial.trial_id not in source.told_ended:
            if trial.status == TrialStatus.ERROR:
                scheduler.on_trial_error(control, trial)
            else:
                scheduler.on_trial_complete(control, trial, trial.last_flat_result)
            source.ended(trial.trial_id, trial.last_flat_result, error=trial.status == TrialStatus.ERROR)
    return seen


def adopt_stored_sweep(controller: Any, checkpoints: CheckpointManager, sweep: StoredSweep, store: Store) -> None:
    """A resume: the checkpoint records come back (restarted trials lose theirs), then the trials;
    a trial whose checkpoint on record was deleted from disk falls back to its newest one left."""
    checkpoints.load()
    for trial_id in sweep.restarted:
        checkpoints.forget(trial_id)
    for trial in sweep.trials:
        if trial.status == TrialStatus.PENDING and trial.checkpoint_path and not checkpoints.present(trial.checkpoint_path):
            _fall_back(trial, checkpoints, store)
    controller.adopt(sweep)


def _fall_back(trial: Trial, checkpoints: CheckpointManager, store: Store) -> None:
    """A trial to run whose checkpoint on record is gone from disk: it goes on from its newest
    checkpoint still there (or from scratch), and the user is told which one went missing."""
    newest = checkpoints.newest(trial.trial_id)
    then = (f"it goes on from {newest.path} (iteration {newest.iteration}), its newest checkpoint still there"
            if newest is not None else "no checkpoint of it is left: it starts again from scratch")
    logger.warning("trial %s: its latest checkpoint %s is missing; %s", trial.trial_name, trial.checkpoint_path, then)
    trial.checkpoint_path = newest.path if newest is not None else None
    store.update_trial(trial.trial_id, checkpoint_path=trial.checkpoint_path)
