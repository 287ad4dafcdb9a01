"""What a running sweep writes to its store, and when it is committed.

The controller decides; this records. Results are queued and written in batches (one
transaction per loop pass); a decision that must survive a driver killed right after it (a
trial stopped, paused, exploited) first makes everything queued durable (:meth:`make_durable`).
The scheduler's and searcher's state is snapshotted every couple of seconds and at the end,
together with what the controller had seen, so a resume makes the decisions an uninterrupted
sweep would have made (see ``tuner.execution.resume``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import ray

from schedulers.trial_status import TrialStatus
from tuner.errors import StorageFullError
from tuner.store import Store, StoreError
from tuner.sweep_status import SweepStatus

if TYPE_CHECKING:
    from tuner.execution.profiler import SweepProfiler
    from tuner.execution.trial import Trial

logger = logging.getLogger("tuner.execution.controller")

STATE_SAVE_INTERVAL_S = 2.0


class SweepRecord:
    """One sweep's writes: trials, results, checkpoints, exploits, statuses and state snapshots."""

    def __init__(self, store: Store, experiment_id: int, profiler: SweepProfiler | None = None) -> None:
        self.store = store
        self.experiment_id = experiment_id
        self._profiler = profiler
        self._rows: list[tuple[str, int, dict[str, Any]]] = []  # results not written yet
        self._state_saved_at = 0.0
        self._unpicklable: set[str] = set()

    def timed(self, part: str) -> Any:
        """Time the driver's work on ``part`` for the sweep's profile (when there is one)."""
        return self._profiler.driver_part(part) if self._profiler is not None else contextlib.nullcontext()

    # -- trials and their results ----------------------------------------------------------------
    def new_trial(self, trial: Trial, state: Callable[[], Mapping[str, Any]]) -> None:
        """A trial the searcher proposed, with the searcher state that made it (one batch)."""
        with self.store.batch():
            self.store.add_trial(self.experiment_id, trial.trial_id, trial.index, trial.config,
                                 TrialStatus.PENDING, config_blob=config_blob(trial.config))
            self.store.update_trial(trial.trial_id, trial_dir=trial.trial_dir)
            self.save_state(state, force=True)

    def result(self, trial_id: str, iteration: int, result: dict[str, Any]) -> None:
        """Queue one result (written by :meth:`flush_results`)."""
        self._rows.append((trial_id, iteration, result))

    def flush_results(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            with self.timed("store"):
                self.store.add_results(self.experiment_id, rows)

    def make_durable(self) -> None:
        """Commit everything queued so far (results included) before acting on a decision."""
        self.flush_results()
        self.store.flush()

    def checkpoint(self, trial_id: str, path: str) -> None:
        self.store.update_trial(trial_id, checkpoint_path=path)

    def status(self, trial: Trial, **fields: Any) -> None:
        """The trial's status (with its last result, and ``fields`` such as a moved checkpoint)."""
        if trial.last_result is not None:
            fields["last_result"] = trial.last_result
        self.store.update_trial(trial.trial_id, status=trial.status, **fields)

    def failure(self, trial: Trial) -> None:
        self.store.update_trial(trial.trial_id, error=trial.error, num_failures=trial.num_failures)

    def exploit(self, trial: Trial, donor_id: str, checkpoint: str, new_config: dict[str, Any]) -> None:
        """``trial`` takes the donor's ``checkpoint`` and ``new_config``: the lineage and the trial's
        new record, durable before the trial takes the donor's state."""
        self.store.add_exploit(self.experiment_id, trial.trial_id, donor_id, trial.iteration, trial.config,
                               new_config, checkpoint)
        self.store.update_trial(trial.trial_id, config=new_config, config_blob=config_blob(new_config),
                                checkpoint_path=checkpoint)
        self.make_durable()

    # -- the sweep -------------------------------------------------------------------------------
    def save_state(self, state: Callable[[], Mapping[str, Any]], force: bool = False) -> None:
        """Snapshot ``state()`` (name -> object with ``state_dict()``, or a plain dict) every couple
        of seconds, and always with ``force``, in one batch; the trials' profiles with it."""
        now = time.monotonic()
        if not force and now - self._state_saved_at < STATE_SAVE_INTERVAL_S:
            return
        self._state_saved_at = now
        with self.timed("store"):
            blobs = {}
            for key, owner in state().items():
                try:
                    blobs[key] = ray.cloudpickle.dumps(owner if isinstance(owner, dict) else owner.state_dict())
                except Exception as exc:  # noqa: BLE001 - a user's state we cannot pickle: say so once
                    if key not in self._unpicklable:
                        self._unpicklable.add(key)
                        logger.warning("cannot store the %s's state (a resume will start it afresh): %s", key, exc)
            with self.store.batch():  # one snapshot: scheduler, searcher and what they had seen
                for key, blob in blobs.items():
                    self.store.save_state(self.experiment_id, key, blob)
            self.save_profiles()

    def save_profiles(self) -> None:
        """Store the profiles of trials whose figures changed since the last save (one batch)."""
        if self._profiler is not None:
            for trial_id in self._profiler.take_changed():
                self.store.save_trial_profile(self.experiment_id, trial_id, self._profiler.trial_row(trial_id))

    def sweep_status(self, status: SweepStatus) -> None:
        self.store.set_experiment_status(self.experiment_id, status)

    def flush(self) -> None:
        self.store.flush()

    def abort(self, status: SweepStatus, ended_by: BaseException, stop_running: Callable[[], None]) -> None:
        """Keep what the sweep has (its results, the trials ``stop_running`` cuts short) on record
        after an exception; a failure here is logged, never raised over the one that ended the sweep."""
        for step in (self.flush_results, stop_running, lambda: self.sweep_status(status)):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - e.g. the store is what failed
                after_failure(ended_by, "while stopping the sweep", exc)


def after_failure(ended_by: BaseException | None, what: str, exc: Exception) -> None:
    """Say in one line that cleaning up after the exception that ended the sweep failed too;
    nothing when that exception was the storage's own (the store, a full disk): its line says it."""
    if isinstance(ended_by, (StoreError, StorageFullError)):
        logger.debug("%s: %s", what, exc, exc_info=exc)
        return
    logger.warning("%s: %s", what, str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))


def config_blob(config: dict[str, Any]) -> bytes | None:
    """The pickle the store keeps beside a config's JSON copy, for the values JSON cannot hold;
    None for plain data, which the JSON copy gives back exactly (a second whole copy of a big
    config would only double the store)."""
    from tuner.store.codec import round_trips

    if round_trips(config):
        return None
    try:
        return ray.cloudpickle.dumps(config)
    except Exception:  # noqa: BLE001 - the JSON copy is still stored
        return None
