"""The driver-side event loop of a sweep: starts trials, collects results, applies decisions.

One loop, never blocking on one trial: every call to a trial actor is in flight at once and
``ray.wait`` returns whichever finish first. Each trial owns one placement group; when a trial
ends its actor and group are handed to the next trial of the same shape, so a sweep of many
short trials does not pay for a new Ray worker process per trial (see ``slots``). Ray itself is
reached through a ``Backend`` (see ``backend``), so the decisions can be tested without it.

One module, longer than most, because it is one job: starting trials, their results, the
scheduler's decisions, pauses, exploits and failures all read and change the same loop state
(calls in flight, trial statuses, the store's batches), which a split would only pass around.
Changing a running trial's resources (``ResourceChangingScheduler``) is placement-group work of
its own, in ``resource_changes``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import numbers
import os
import time
import uuid
from typing import Any, Callable, Mapping

import ray

from schedulers.trial_scheduler import TrialScheduler
from schedulers.trial_status import ENDED, TrialStatus
from tuner.callback import CallbackList
from tuner.execution.backend import Backend, CallFailed
from tuner.execution import signals
from tuner.execution.budget import BudgetCut, save_budget_cut, unproposed
from tuner.execution.checkpoint_manager import CheckpointManager
from tuner.execution.exploits import Exploit, ExploitBook
from tuner.execution.profiler import SweepProfiler
from tuner.execution.protocol import Call, Report, RunReply
from tuner.execution.progress import ProgressReporter
from tuner.execution.packed_call import pack
from tuner.execution.resource_changes import ResourceChanges
from tuner.execution.resources import PlacementGroupFactory, check_feasible
from tuner.execution.resume import StoredSweep
from tuner.execution.slots import SlotPool
from tuner.execution.trial import Trial
from tuner.execution.trial_naming import TrialNamer
from tuner.flatten import flat_result
from tuner.run_options import RunOptions
from tuner.search.searcher import Searcher
from tuner.stopper import DictStopper, Stopper
from tuner.errors import StorageFullError, disk_full_line
from tuner.storage import Storage
from tuner.storage.keeper import start_keeper
from tuner.store import Store, StoreError
from tuner.sweep_status import SweepStatus
from tuner.trainable.checkpoint import Checkpoint
from tuner.trainable.context import TrialInfo
from tuner.trainable.function_trainable import FunctionTrainable
from tuner.trainable.trainable import AUTO_RESULT_KEYS, Trainable

logger = logging.getLogger(__name__)

#: How long a trial actor may keep running fast iterations before answering (see TrialActor.run).
RESULT_BATCH_WINDOW_S = 0.005
RESULT_BATCH_MAX = 100
_STATE_SAVE_INTERVAL_S = 2.0
# How long a sweep that ends waits for the answers it no longer wants (its actors are dead by then).
DISCARD_WAIT_S = 2.0


class Controller(ResourceChanges):
    """Runs one experiment to completion.

    ``options`` are ``tune.run``'s, checked (see ``tune.run`` for their meaning; the controller
    reads the metric and mode, the trial limits, failures, checkpointing and the time budget from
    them); the other arguments are the parts ``tune.run`` made from them.
    """

    #: Result keys a trial keeps counting from its own values after a PBT exploit (see
    #: ``TrialActor.exploit``: its stored curve stays one row per iteration), where Ray Tune's
    #: trial goes on from the donor's; PBT measures its next interval accordingly.
    exploit_keeps: tuple[str, ...] = ("training_iteration", "time_total_s")

    def __init__(
        self,
        *,
        trainable_cls: type[Trainable],
        experiment_id: int,
        experiment_name: str,
        run_dir: str,
        store: Store,
        searcher: Searcher,
        scheduler: TrialScheduler,
        stopper: Stopper,
        resources_for: Callable[[dict[str, Any]], PlacementGroupFactory],
        options: RunOptions,
        max_trials: int | None = None,
        reporter: ProgressReporter | None = None,
        callbacks: CallbackList | None = None,
        callback_info: dict[str, Any] | None = None,
        checkpoint_manager: CheckpointManager | None = None,
        trial_namer: TrialNamer | None = None,
        profiler: SweepProfiler | None = None,
        backend: Backend | None = None,
        storage: Storage | None = None,
    ) -> None:
        self._trainable_cls = trainable_cls
        self._is_function = issubclass(trainable_cls, FunctionTrainable)
        self._experiment_id = experiment_id
        self._experiment_name = experiment_name
        self._run_dir = run_dir
        # The sweep's object storage, where trials put their checkpoints (None: the run directory).
        self._storage = storage if storage is not None and not storage.is_local else None
        # A plain folder on a cluster of several nodes: the actor keeping checkpoints on this node
        # (made once a second node is seen, see _checkpoint_keeper).
        self._keeper: tuple[Any, str] | None = None
        self._store = store
        self._searcher = searcher
        self._scheduler = scheduler
        self._stopper = stopper
        self._metric = options.metric
        self._mode = options.mode
        self._resources_for = resources_for
        self._prepared: dict[str, tuple[dict[str, Any], Any]] = {}  # trial id -> (config, prepare_trial's)
        self._max_trials = max_trials
        self._max_concurrent = options.max_concurrent_trials or 0
        self._max_failures = options.max_failures
        self._checkpoint_freq = options.checkpoint_freq
        self._checkpoint_at_end = options.checkpoint_at_end
        self._time_budget_s = options.time_budget_s
        self._callbacks = callbacks or CallbackList([])
        if reporter is not None:  # the progress output is a callback like any other
            self._callbacks.add(reporter)
        self._checkpoints = checkpoint_manager or CheckpointManager(store, experiment_id, run_dir)
        self._namer = trial_namer
        self._fail_fast = options.fail_fast
        self._failed_fast = False  # a trial failed for good under fail_fast: stop everything
        self._callback_info = dict(callback_info or {})
        self._profiler = profiler
        self._iteration = 0  # loop passes, the ``iteration`` callbacks see

        self._trials: list[Trial] = []
        self._pool = SlotPool(backend, cpu_share=options.cpu_share)  # Ray's unless a backend is given
        self._backend = self._pool.backend
        self._inflight: dict[Any, tuple[Trial, Call]] = {}  # a call's answer handle -> what it was
        self._discarded: list[Any] = []  # answers no longer wanted, read when they come
        self._pending_rows: list[tuple[str, int, dict[str, Any]]] = []
        self._id_prefix = uuid.uuid4().hex[:5]
        self._searcher_finished = False
        self._stop_everything = False
        self._budget_spent = False  # the time budget stopped the sweep (see ``budget``)
        self._metric_checked = options.metric is None and not isinstance(stopper, DictStopper)
        self._start_time = 0.0
        # Fast iterations may share a round trip when no decision can depend on the exact
        # state after one: the scheduler never pauses and no end checkpoint is taken.
        self._batch = RESULT_BATCH_MAX if scheduler.never_pauses and not options.checkpoint_at_end else 1
        self._warned_unsavable = False
        self._exploits = ExploitBook()  # PBT's checkpoints and exploits in flight
        self._searcher_takes_pruned = _accepts_keyword(searcher.on_trial_complete, "pruned")
        self._state_saved_at = 0.0
        self._seen: dict[str, int] = {}  # trial_id -> last iteration the decisions were made on
        self._told_ended: set[str] = set()  # trials whose end the searcher has been told
        self._unpicklable: set[str] = set()

    # -- what schedulers and searchers may ask ------------------------------------------------
    def get_trials(self) -> list[Trial]:
        return list(self._trials)

    def stop_trial(self, trial: Trial) -> None:
        """Stop a running, pending or paused trial for good (HyperBand's bracket losers)."""
        if trial.status in ENDED:
            return
        self._searcher_complete(trial, pruned=True)
        if trial.status == TrialStatus.RUNNING:
            self._end_trial(trial, TrialStatus.TERMINATED)
        else:
            self._set_status(trial, TrialStatus.TERMINATED)

    def get_live_trials(self) -> list[Trial]:
        """The trials that have not ended (PENDING, RUNNING, PAUSED)."""
        return [t for t in self._trials if t.status not in ENDED]

    def checkpoint_trial(self, trial: Trial) -> None:
        """Checkpoint ``trial`` after its current result, so it can be a PBT donor (not a function
        that has reported no checkpoint: it has none to give, and an exploit from it is skipped)."""
        if self._cannot_save(trial, "be checkpointed for an exploit"):
            return
        self._exploits.ask_checkpoint(trial.trial_id)

    def exploit_trial(self, trial: Trial, donor: Trial, new_config: dict[str, Any]) -> bool:
        """After its current result, restore ``trial`` from ``donor``'s checkpoint with ``new_config``.

        A checkpoint the donor was just asked for is waited for (the trial holds its actor
        meanwhile); otherwise the donor's latest checkpoint is used. A donor without one (it
        ended before it saved any) gives nothing: the exploit is skipped with a warning, False.
        """
        if not self._exploits.ask_exploit(trial.trial_id, donor, new_config):
            logger.warning("exploit skipped: donor %s has no checkpoint (it %s without one); %s keeps its own "
                           "state and config", donor.trial_name, "ended" if donor.status in ENDED
                           else "is", trial.trial_name)
            return False
        return True

    def adopt(self, sweep: "StoredSweep") -> None:
        """Continue a stored sweep (before ``run``): its trials, and replay what the stored
        scheduler and searcher state had not seen yet."""
        self._trials = list(sweep.trials)
        if self._namer:
            for trial in self._trials:
                self._namer(trial)
        self._seen = dict(sweep.seen)
        self._told_ended = set(sweep.told_ended)
        if sweep.scheduler_state is not None:
            self._scheduler.load_state_dict(sweep.scheduler_state)
        else:
            for trial in self._trials:
                self._scheduler.on_trial_add(self, trial)
        if sweep.searcher_state is not None:
            self._searcher.load_state_dict(sweep.searcher_state)
        for trial, result in sweep.replay:
            trial.last_flat_result = flat = flat_result(result)
            # Decisions on these results were acted on before the snapshot was taken, or are
            # taken again when the interrupted trial gets there: only the data matters here.
            self._searcher.on_trial_result(trial.trial_id, flat)
            self._scheduler.on_trial_result(self, trial, flat)
            self._seen[trial.trial_id] = int(result["training_iteration"])
        self._exploits.clear_saves()  # asked of trials that are not running: nothing to wait for
        for trial in self._trials:
            if trial.last_result and trial.last_flat_result is None:
                trial.last_flat_result = trial.last_result
            if trial.status in ENDED and trial.trial_id not in self._told_ended:
                if trial.status == TrialStatus.ERROR:
                    self._scheduler.on_trial_error(self, trial)
                else:
                    self._scheduler.on_trial_complete(self, trial, trial.last_flat_result)
                self._searcher_complete(trial, error=trial.status == TrialStatus.ERROR)
        self._metric_checked = self._metric_checked or any(t.last_result for t in self._trials)

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> list[Trial]:
        """Run the experiment until every trial has ended; return the trials."""
        self._backend.await_release()  # an earlier sweep's groups are back: ours are placed without a retry
        self._start_time = time.monotonic()
        if self._profiler is not None:
            self._profiler.loop_start()
        self._pool.read_cluster_resources(force=True)
        self._callbacks.call("setup", **self._callback_info)
        failed = False
        ended_by: BaseException | None = None
        try:
            # SIGTERM is taken at the top of a pass, never halfway through recording a decision.
            with signals.deferring():
                while not self._finished():
                    signals.raise_if_terminated()
                    self._callbacks.call("on_step_begin", self._iteration, self._trials)
                    self._check_budgets()
                    self._fill()
                    self._wait_and_process(timeout=0.5)
                    self._iteration += 1
                    self._save_state()
                    self._callbacks.call("on_step_end", self._iteration, self._trials)
                self._flush_results()
                self._save_state(force=True)
                self._warn_silent_trials()
                self._store.set_experiment_status(self._experiment_id, self._end_status())
        except BaseException as exc:
            failed, ended_by = True, exc
            # A store that fails (full, read-only, gone) cut the sweep short: resumable, like a signal.
            interrupted = isinstance(exc, (KeyboardInterrupt, signals.SweepTerminated, StoreError, StorageFullError))
            self._record_abort(SweepStatus.INTERRUPTED if interrupted else SweepStatus.ERROR, exc)
            raise
        finally:
            if self._profiler is not None:
                self._profiler.loop_end()  # trials still holding resources give them back
            self._pool.destroy_all()
            self._discarded = self._backend.discard(self._discarded, timeout=DISCARD_WAIT_S)
            self._checkpoints.close()
            if self._keeper is not None:
                ray.kill(self._keeper[0])
                self._keeper = None
            try:
                if self._profiler is not None:
                    self._save_profiles()
                self._store.flush()
            except Exception as exc:  # noqa: BLE001 - never raised over the exception that ended the sweep
                if not failed:
                    raise
                _after_failure(ended_by, "could not save the sweep's last writes", exc)
            # ended_by: what cut the sweep short (None: it ran to its end), for callbacks that
            # would otherwise say again what the sweep's own error says.
            self._callbacks.call("on_experiment_end", self._trials, ended_by=ended_by)
        return list(self._trials)

    def _finished(self) -> bool:
        if self._inflight or self._pool.running:
            return False
        if self._stop_everything:
            return True
        if not self._searcher_finished or any(t.status == TrialStatus.PENDING for t in self._trials):
            return False
        paused = [t for t in self._trials if t.status == TrialStatus.PAUSED]
        if paused and self._scheduler.choose_trial_to_run(self) is not None:
            return False
        for trial in paused:  # nothing runs and the scheduler resumes none of them: they are done
            self._scheduler.on_trial_complete(self, trial, trial.last_flat_result)
            self._searcher_complete(trial)
            self._set_status(trial, TrialStatus.TERMINATED)
        return True

    def _check_budgets(self) -> None:
        if self._stop_everything:
            return
        over_time = self._time_budget_s is not None and time.monotonic() - self._start_time >= self._time_budget_s
        if over_time or self._stopper.stop_all() or self._failed_fast:
            why = "time budget spent" if over_time else "a trial failed (fail_fast)" if self._failed_fast else "stopper.stop_all()"
            logger.info("stopping all trials: %s", why)
            self._stop_everything = True
            self._budget_spent = over_time
            # Past the budget, trials that produced nothing (pending, or running without a result
            # yet) did not run to any effect: they stay PENDING, for a resume to run.
            for trial in list(self._trials):
                if trial.status == TrialStatus.RUNNING:
                    self._end_trial(trial, TrialStatus.PENDING if over_time and trial.last_result is None else TrialStatus.TERMINATED)
                elif trial.status == TrialStatus.PAUSED or (trial.status == TrialStatus.PENDING and not over_time):
                    self._set_status(trial, TrialStatus.TERMINATED)

    def _warn_silent_trials(self) -> None:
        """One warning naming the trials that ended without a single result (a function that
        returned before its first ``tune.report``): nothing else would tell them from good ones."""
        silent = [t.trial_name for t in self._trials if t.status == TrialStatus.TERMINATED and t.last_result is None]
        if silent:
            more = f" and {len(silent) - 5} more" if len(silent) > 5 else ""
            logger.warning("sweep %s: %d trial(s) reported no result (a function trainable must call tune.report): "
                           "%s%s", self._experiment_name, len(silent), ", ".join(silent[:5]), more)

    def _end_status(self) -> SweepStatus:
        """The sweep's status once the loop ended: INCOMPLETE when the time budget left trials
        that never ran (logged, and noted in the store for the CLI and analysis), else TERMINATED."""
        cut = None
        if self._budget_spent:
            left = 0 if self._searcher_finished else unproposed(self._searcher, self._max_trials, len(self._trials))
            pending = sum(t.status == TrialStatus.PENDING for t in self._trials)
            if left is None or left + pending:
                total = None if left is None else len(self._trials) + left
                cut = BudgetCut(float(self._time_budget_s or 0.0), None if left is None else left + pending, total)
                logger.warning("sweep %s: %s", self._experiment_name, cut.line("a resume (resume=True)"))
        save_budget_cut(self._store, self._experiment_id, cut)
        return SweepStatus.INCOMPLETE if cut is not None else SweepStatus.TERMINATED

    # -- adding and starting trials ----------------------------------------------------------------
    def _fill(self) -> None:
        while not self._stop_everything:
            with self._timed("scheduler"):
                trial = self._scheduler.choose_trial_to_run(self)
            if trial is None:
                if not self._can_start_more() or not self._add_trial_from_searcher():
                    break
                continue
            assert isinstance(trial, Trial)  # a scheduler chooses among the controller's own trials
            if trial.status not in (TrialStatus.PENDING, TrialStatus.PAUSED) or not self._start_trial(trial):
                break
        # An idle actor waits for a trial that may take it: a pending one, or a paused one that
        # resumes (synchronous PBT pauses every trial at each perturbation point).
        if not any(t.status in (TrialStatus.PENDING, TrialStatus.PAUSED) for t in self._trials):
            self._pool.destroy_idle()

    def _can_start_more(self) -> bool:
        return not self._max_concurrent or len(self._pool.running) < self._max_concurrent

    def _add_trial_from_searcher(self) -> bool:
        if self._searcher_finished:
            return False
        if self._max_trials is not None and len(self._trials) >= self._max_trials:
            self._searcher_finished = True
            return False
        trial_id = f"{self._id_prefix}_{len(self._trials):05d}"
        with self._timed("searcher"):
            config = self._searcher.suggest(trial_id)
        if config is None or config == Searcher.FINISHED:
            live = any(t.status in (TrialStatus.PENDING, TrialStatus.PAUSED, TrialStatus.RUNNING) for t in self._trials)
            if config == Searcher.FINISHED or not live:
                self._searcher_finished = True
            return False
        if isinstance(config, str):
            raise TypeError(f"searcher.suggest returned {config!r}: expected a config dict, None or Searcher.FINISHED")
        pgf = self._resources_for(config)
        trial = Trial(
            trial_id=trial_id,
            index=len(self._trials),
            config=config,
            experiment_name=self._experiment_name,
            trainable_name=self._trainable_cls.__name__,
            run_dir=self._run_dir,
            placement_group_factory=pgf,
        )
        if self._namer:
            self._namer(trial)
        check_feasible(pgf, self._pool.nodes, f"resources of trial {trial.trial_name}")
        self._trials.append(trial)
        self._scheduler.on_trial_add(self, trial)
        if trial.config is not config:  # the scheduler set the trial's config (a PBT replay's first one)
            config = trial.config
            trial.placement_group_factory = pgf = self._resources_for(config)
            check_feasible(pgf, self._pool.nodes, f"resources of trial {trial.trial_name}")
        with self._store.batch():  # the trial and the searcher state that made it land together
            self._store.add_trial(self._experiment_id, trial_id, trial.index, config, TrialStatus.PENDING, config_blob=_blob(config))
            self._store.update_trial(trial_id, trial_dir=trial.trial_dir)
            self._save_state(force=True)
        return True

    def _info(self, trial: Trial) -> TrialInfo:
        """The trial's info for its actor, with the trainable's ``prepare_trial`` of its current
        config, worked out once per config (an exploit gives the trial a new one)."""
        held = self._prepared.get(trial.trial_id)
        if held is None or held[0] is not trial.config:
            held = self._prepared[trial.trial_id] = (trial.config, self._trainable_cls.prepare_trial(trial.config))
        info = trial.info(prepared=held[1])
        if self._storage is None:
            keeper = self._checkpoint_keeper()
            return info if keeper is None else dataclasses.replace(info, keeper=keeper[0], driver_node=keeper[1])
        folder = self._storage.join(self._experiment_name, os.path.basename(trial.trial_dir))
        return dataclasses.replace(info, storage=self._storage, storage_dir=folder)

    def _checkpoint_keeper(self) -> tuple[Any, str] | None:
        """The sweep's checkpoint keeper once the cluster has a second node (the sweep's folder is
        on this node's disk only, as far as anyone knows: see ``tuner.storage.keeper``)."""
        if self._keeper is None:
            self._pool.read_cluster_resources(force=True)
            if len(self._pool.nodes) > 1:
                self._keeper = start_keeper()
        return self._keeper

    def _start_trial(self, trial: Trial) -> bool:
        if not self._can_start_more():
            return False
        if self._exploits.waits_for_donor(trial.trial_id):
            return False  # started once its donor's checkpoint is on disk
        slot = self._pool.take(trial.trial_id, trial.placement_group_factory)
        if slot is None:
            return False
        if self._profiler is not None:
            self._profiler.acquire(trial.trial_id, slot.pgf.required().get("CPU", 0.0), new_actor=not slot.has_trainable)
        self._set_status(trial, TrialStatus.RUNNING)
        self._callbacks.call("on_trial_start", self._iteration, self._trials, trial)
        reapply_config = False
        exploit = self._exploits.take_exploit(trial.trial_id)
        if exploit is not None:  # exploited while paused: start from the donor's checkpoint
            self._record_exploit(trial, exploit)
            reapply_config = True
        run_args = dict(
            max_results=self._batch,
            window_s=RESULT_BATCH_WINDOW_S,
            trainable_cls=None if slot.has_trainable else self._trainable_cls,
            config=trial.config,
            info=self._info(trial),
            checkpoint_path=trial.checkpoint_path,
            checkpoint_freq=0 if self._is_function else self._checkpoint_freq,
            reapply_config=reapply_config,
            progress=trial.own_progress if trial.checkpoint_path else None,
        )
        # A reused actor already holds the class: the rest packs into one cheap argument.
        packed = pack(run_args) if slot.has_trainable else None
        ref = (self._backend.call(slot.actor, "run_packed", packed) if packed is not None
               else self._backend.call(slot.actor, "run", **run_args))
        slot.has_trainable = True
        self._inflight[ref] = (trial, Call.RUN)
        return True

    # -- talking to trial actors -----------------------------------------------------------------
    def _submit_run(self, trial: Trial) -> None:
        slot = self._pool.running[trial.trial_id]
        self._inflight[self._backend.call(slot.actor, "run", self._batch, RESULT_BATCH_WINDOW_S)] = (trial, Call.RUN)

    def _wait_and_process(self, timeout: float) -> None:
        if self._discarded:
            self._discarded = self._backend.discard(self._discarded, timeout=0)
        if not self._inflight:
            if self._pool.running or not self._finished():
                time.sleep(min(timeout, 0.01))
            return
        for ref in self._backend.wait(list(self._inflight), timeout):
            trial, kind = self._inflight.pop(ref)
            try:
                value = self._backend.get(ref)
            except CallFailed as exc:
                self._on_trial_failure(trial, exc.error, exc.actor_died)
                continue
            if kind is Call.RUN:
                self._on_results(trial, value)
            elif kind is Call.RESOURCES:
                self._on_resources_updated(trial, value)
            else:
                self._on_saved(trial, value, then=kind)
        self._flush_results()

    def _on_results(self, trial: Trial, reply: RunReply) -> None:
        """Apply a run call's reports in order; drop what follows a decision other than CONTINUE."""
        if self._profiler is not None:
            self._profiler.actor_timing(trial.trial_id, reply.timing,
                                        [r.result for r in reply.reports if r.result is not None])
        for report in reply.reports:
            if report.error is not None:
                self._on_trial_failure(trial, report.error, actor_died=False)
                return
            if not self._on_step_result(trial, report):
                return
        self._continue_trial(trial)

    def _continue_trial(self, trial: Trial) -> None:
        """Submit the trial's next iterations, after any exploit or checkpoint asked for it."""
        if self._exploits.waits_for_donor(trial.trial_id):
            self._exploits.park(trial)  # goes on once the donor's save lands (see _go_on)
            return
        exploit = self._exploits.take_exploit(trial.trial_id)
        slot = self._pool.running[trial.trial_id]
        if exploit is not None:
            donor_checkpoint = self._record_exploit(trial, exploit)
            self._inflight[self._backend.call(slot.actor, "exploit", trial.config, donor_checkpoint,
                                              self._info(trial))] = (trial, Call.EXPLOIT)
        if self._exploits.take_checkpoint_request(trial.trial_id):
            self._inflight[self._backend.call(slot.actor, "save")] = (trial, Call.CHECKPOINT)
        self._submit_run(trial)  # actor calls run in order: exploit, save, then the next iterations

    def _record_exploit(self, trial: Trial, exploit: Exploit) -> str:
        """Apply a requested exploit to the trial's record (config, checkpoint) and store its lineage."""
        donor, new_config = exploit.donor, exploit.config
        assert donor.checkpoint_path is not None
        self._store.add_exploit(
            self._experiment_id, trial.trial_id, donor.trial_id, trial.iteration, trial.config, new_config,
            donor.checkpoint_path,
        )
        time_total = float((trial.last_result or {}).get("time_total_s", 0.0))
        # Its own checkpoint (a PBT replay changing its config) holds its own counters already.
        trial.own_progress = None if donor is trial else (trial.iteration, time_total)
        trial.config = new_config
        trial.checkpoint_path = donor.checkpoint_path
        trial.pending_uploads.clear()  # its own state goes: the actor drops those uploads
        self._store.update_trial(
            trial.trial_id, config=new_config, config_blob=_blob(new_config), checkpoint_path=donor.checkpoint_path
        )
        self._make_durable()  # the exploit is on record before the trial takes the donor's state
        return donor.checkpoint_path

    def _save_state(self, force: bool = False) -> None:
        """Store the scheduler's and searcher's state (every couple of seconds, and at the end)."""
        now = time.monotonic()
        if not force and now - self._state_saved_at < _STATE_SAVE_INTERVAL_S:
            return
        self._state_saved_at = now
        with self._timed("store"):
            self._write_state()
            self._save_profiles()

    def _write_state(self) -> None:
        blobs = {"controller": ray.cloudpickle.dumps({"seen": self._seen, "told_ended": sorted(self._told_ended)})}
        for key, owner in (("scheduler", self._scheduler), ("searcher", self._searcher)):
            try:
                blobs[key] = ray.cloudpickle.dumps(owner.state_dict())
            except Exception as exc:  # noqa: BLE001 - a user's state we cannot pickle: say so once
                if key not in self._unpicklable:
                    self._unpicklable.add(key)
                    logger.warning("cannot store the %s's state (a resume will start it afresh): %s", key, exc)
        with self._store.batch():  # one snapshot: scheduler, searcher and what they had seen
            for key, blob in blobs.items():
                self._store.save_state(self._experiment_id, key, blob)

    def _flush_results(self) -> None:
        if self._pending_rows:
            rows, self._pending_rows = self._pending_rows, []
            with self._timed("store"):
                self._store.add_results(self._experiment_id, rows)

    def _timed(self, part: str) -> Any:
        """Time the driver's work on ``part`` for the sweep's profile (when there is one)."""
        return self._profiler.driver_part(part) if self._profiler is not None else contextlib.nullcontext()

    # -- results and decisions -------------------------------------------------------------------
    def _on_step_result(self, trial: Trial, report: Report) -> bool:
        """Record one report and act on the decisions it brings; True if the trial goes on."""
        checkpoint_path = report.checkpoint_path
        if report.finished or report.result is None:
            if checkpoint_path:
                self._set_checkpoint(trial, checkpoint_path)
            self._complete_trial(trial)
            return False
        result = report.result
        flat = flat_result(result)
        self._check_result(trial, flat)
        trial.last_result = result
        trial.last_flat_result = flat
        iteration = int(result["training_iteration"])
        self._pending_rows.append((trial.trial_id, iteration, result))
        if checkpoint_path:
            self._set_checkpoint(trial, checkpoint_path)
        for uri, _ in report.uploaded:
            self._set_checkpoint(trial, uri)
        if report.uploading:
            trial.pending_uploads.append((report.uploading, iteration, result))
        if iteration <= self._seen.get(trial.trial_id, 0):
            return True  # re-run after a restore from an older checkpoint: decided on already
        self._seen[trial.trial_id] = iteration
        if self._callbacks:
            with self._timed("callbacks"):
                self._callbacks.call("on_trial_result", self._iteration, self._trials, trial, result)
        with self._timed("searcher"):
            self._searcher.on_trial_result(trial.trial_id, flat)
        if result.get("done") or self._stopper(trial.trial_id, flat):
            self._complete_trial(trial)
            return False
        if self._stop_everything:
            self._end_trial(trial, TrialStatus.TERMINATED)
            return False
        with self._timed("scheduler"):
            decision = self._scheduler.on_trial_result(self, trial, flat)
        if decision == TrialScheduler.CONTINUE:
            return True
        if decision == TrialScheduler.STOP:
            self._searcher_complete(trial, pruned=not self._scheduler.stop_means_complete(trial, flat))
            self._scheduler.on_trial_remove(self, trial)
            self._end_trial(trial, TrialStatus.TERMINATED, durable=True)
        elif decision == TrialScheduler.PAUSE:
            if self._cannot_save(trial, "pause"):
                return True  # it keeps running, as Ray Tune's would restart it: no result lost
            self._pause_trial(trial)
        else:
            raise ValueError(
                f"{type(self._scheduler).__name__}.on_trial_result returned {decision!r}; "
                f"expected one of {list(TrialScheduler.DECISIONS)}"
            )
        return False

    def _check_result(self, trial: Trial, flat: Mapping[str, Any]) -> None:
        """Fail the sweep, before the result is recorded, when it cannot be ranked or stopped on:
        the sweep's metric or a ``stop`` key missing from the first result, or a metric value that
        is not a number. Missing keys are checked once (a resumed sweep's trials reported them)."""
        value = flat.get(self._metric) if self._metric is not None else None
        if value is not None and type(value) not in (float, int) and not isinstance(value, numbers.Real):
            raise ValueError(
                f"metric {self._metric!r} must be a number: trial {trial.trial_name} reported "
                f"{value!r} ({type(value).__name__}) at iteration {flat.get('training_iteration')}"
            )
        if self._metric_checked:
            return
        reported = sorted(k for k in flat if not k.startswith("_") and k not in AUTO_RESULT_KEYS)
        if self._metric is not None and self._metric not in flat:
            raise ValueError(
                f"metric {self._metric!r} was never reported: the first result (trial {trial.trial_name}) "
                f"holds only {reported}; name one of them as tune.run's metric"
            )
        stop_keys = self._stopper.thresholds if isinstance(self._stopper, DictStopper) else {}
        missing = [key for key in stop_keys if key not in flat]
        if missing:
            raise ValueError(
                f"stop: key {missing[0]!r} was never reported: the first result (trial {trial.trial_name}) "
                f"holds only {reported} and the engine's own keys {list(AUTO_RESULT_KEYS)}"
            )
        self._metric_checked = True

    def _complete_trial(self, trial: Trial) -> None:
        """The trial finished on its own (its function returned, done=True, or a stop condition)."""
        self._scheduler.on_trial_complete(self, trial, trial.last_flat_result)
        self._searcher_complete(trial)
        self._end_trial(trial, TrialStatus.TERMINATED)

    def _searcher_complete(self, trial: Trial, *, pruned: bool = False, error: bool = False) -> None:
        """Tell the searcher a trial ended; ``pruned`` (a scheduler stopped it) if it can take that."""
        self._told_ended.add(trial.trial_id)
        if pruned and self._searcher_takes_pruned:
            self._searcher.on_trial_complete(trial.trial_id, trial.last_flat_result, error=error, pruned=True)
        else:
            self._searcher.on_trial_complete(trial.trial_id, trial.last_flat_result, error=error)

    def _end_trial(self, trial: Trial, status: TrialStatus, durable: bool = False) -> None:
        """End a trial; with ``durable`` its status (and results so far) are committed before
        its actor is let go, so a driver that dies right after cannot lose the decision."""
        self._drop_inflight(trial)
        want_save = (
            status == TrialStatus.TERMINATED
            and self._checkpoint_at_end
            and not self._is_function
            and trial.last_result is not None
            and not (trial.checkpoint_path or "").endswith(f"checkpoint_{trial.iteration:06d}")
        )
        # A checkpoint still uploading is waited for (the save answers with it) and recorded.
        uploading = status == TrialStatus.TERMINATED and bool(trial.pending_uploads)
        if (want_save or uploading) and trial.trial_id in self._pool.running:
            self._inflight[self._backend.call(self._pool.running[trial.trial_id].actor, "save")] = (trial, Call.END)
            return
        trial.pending_uploads.clear()  # the actor deletes them: nothing on record will point at them
        self._set_status(trial, status)
        if durable:
            self._make_durable()
        self._release_slot(trial)

    def _make_durable(self) -> None:
        """Commit everything queued so far (results included) before acting on a decision."""
        self._flush_results()
        self._store.flush()

    def _cannot_save(self, trial: Trial, to: str) -> bool:
        """Whether ``trial`` is a function trainable that has reported no checkpoint, which can
        neither pause nor give one (warned once per sweep)."""
        if not self._is_function or trial.checkpoint_path:
            return False
        if not self._warned_unsavable:
            self._warned_unsavable = True
            logger.warning("trial %s cannot %s: its function has reported no checkpoint (pass checkpoint= to "
                           "tune.report to make it pausable); such trials keep running instead", trial.trial_name, to)
        return True

    def _pause_trial(self, trial: Trial) -> None:
        self._inflight[self._backend.call(self._pool.running[trial.trial_id].actor, "save")] = (trial, Call.PAUSE)

    def _on_saved(self, trial: Trial, value: Any, then: Call) -> None:
        """A save (or exploit) the controller asked for is done; ``then`` says what it was for."""
        if then is Call.EXPLOIT:
            return
        self._set_checkpoint(trial, value)
        waiting = self._exploits.saved(trial.trial_id)  # a pause save is also the checkpoint asked for
        if waiting is not None:
            self._go_on(waiting)
        if then is Call.CHECKPOINT:
            return
        self._set_status(trial, TrialStatus.PAUSED if then is Call.PAUSE else TrialStatus.TERMINATED)
        if then is Call.PAUSE:
            self._make_durable()
        self._release_slot(trial)

    def _set_checkpoint(self, trial: Trial, path: str) -> None:
        # Results first: a checkpoint on record must never be ahead of the stored results it
        # covers, or a resume from it would leave a gap in the trial's curve.
        self._flush_results()
        # An upload confirmed: it and every earlier one are there (a save the controller asked
        # for answers once all of the trial's uploads are; its checkpoint comes after them).
        uploads = [uri for uri, _, _ in trial.pending_uploads]
        if path in uploads:
            confirmed = trial.pending_uploads[:uploads.index(path) + 1]
        else:
            confirmed = [*trial.pending_uploads, (path, trial.iteration, trial.last_result)]
        del trial.pending_uploads[:len(confirmed)]
        for uri, iteration, metrics in confirmed:
            trial.checkpoint_path = uri
            trial.own_progress = None  # its own checkpoint now, with its own iteration
            self._store.update_trial(trial.trial_id, checkpoint_path=uri)
            self._checkpoints.register(trial.trial_id, uri, iteration, metrics,
                                       protected=lambda: self._checkpoint_paths(but=None))
            if self._callbacks:
                self._callbacks.call("on_checkpoint", self._iteration, self._trials, trial, Checkpoint(uri))

    def _checkpoint_paths(self, but: Trial | None) -> set[str]:
        """The checkpoints trials point at (other than ``but``): retention must not delete them."""
        return {t.checkpoint_path for t in self._trials if t is not but and t.checkpoint_path}

    def _set_status(self, trial: Trial, status: TrialStatus) -> None:
        trial.status = status
        fields: dict[str, Any] = {"status": status}
        if trial.last_result is not None:
            fields["last_result"] = trial.last_result
        if status == TrialStatus.TERMINATED:  # finished: trimmed to its num_to_keep best checkpoints
            moved = self._checkpoints.finish(trial.trial_id, protected=lambda: self._checkpoint_paths(but=trial))
            if moved is not None:
                trial.checkpoint_path = fields["checkpoint_path"] = moved
        self._store.update_trial(trial.trial_id, **fields)
        if status in ENDED:
            hook = "on_trial_complete" if status == TrialStatus.TERMINATED else "on_trial_error"
            self._callbacks.call(hook, self._iteration, self._trials, trial)

    # -- failures --------------------------------------------------------------------------------
    def _on_trial_failure(self, trial: Trial, error: str, actor_died: bool) -> None:
        full = disk_full_line(error)
        if full is not None:  # the disk, not the trial: every trial writing there would fail next
            raise StorageFullError(f"no space left for the files of trial {trial.trial_name} ({full}): the sweep "
                                   f"stopped, its trials resumable from their last checkpoints")
        trial.num_failures += 1
        trial.error = error
        trial.pending_uploads.clear()  # it restarts from the last checkpoint on record
        self._store.update_trial(trial.trial_id, error=trial.error, num_failures=trial.num_failures)
        logger.warning("trial %s failed (%d time(s)):\n%s", trial.trial_name, trial.num_failures, trial.error)
        self._drop_inflight(trial)
        self._reset_resources(trial)
        if actor_died:
            self._profile_release(trial)
            self._pool.discard(trial.trial_id)
        else:
            self._release_slot(trial)
        retry = self._max_failures < 0 or trial.num_failures <= self._max_failures
        if retry and not self._stop_everything:
            self._set_status(trial, TrialStatus.PENDING)
            return
        self._set_status(trial, TrialStatus.ERROR)
        self._scheduler.on_trial_error(self, trial)
        self._searcher_complete(trial, error=True)
        self._failed_fast = self._failed_fast or bool(self._fail_fast)

    def _drop_inflight(self, trial: Trial) -> None:
        """Forget calls still in flight for ``trial``: their answers no longer matter."""
        for ref, (other, _) in list(self._inflight.items()):
            if other is trial:
                del self._inflight[ref]
                self._discarded.append(ref)
        self._go_on(self._exploits.forget(trial.trial_id))  # it will not be a donor after all

    def _go_on(self, trials: list[Trial]) -> None:
        """Trials that waited for a donor's checkpoint go on (with it, or without if none came)."""
        for trial in trials:
            if trial.status == TrialStatus.RUNNING and trial.trial_id in self._pool.running:
                self._continue_trial(trial)

    # -- slots -------------------------------------------------------------------------------------
    def _release_slot(self, trial: Trial) -> None:
        self._reset_resources(trial)
        self._profile_release(trial)
        # Free what the trainable holds (rollout actors, say) now. A function trainable
        # holds nothing but its thread, which the actor's next start or exit ends.
        self._pool.release(trial.trial_id, stop_trainable=not self._is_function)

    def _profile_release(self, trial: Trial) -> None:
        """The trial gave its resources back: account its time (stored with the next state save)."""
        if self._profiler is not None:
            self._profiler.release(trial.trial_id)

    def _save_profiles(self) -> None:
        """Store the profiles of trials whose figures changed since the last save (one batch)."""
        if self._profiler is not None:
            for trial_id in self._profiler.take_changed():
                self._store.save_trial_profile(self._experiment_id, trial_id, self._profiler.trial_row(trial_id))

    def _record_abort(self, sweep_status: SweepStatus, ended_by: BaseException) -> None:
        """Keep what the sweep has (its results, the trials cut short) on record after an
        exception; a failure here is logged, never raised over the exception that ended the sweep."""
        for step in (self._flush_results, self._abort_running,
                     lambda: self._store.set_experiment_status(self._experiment_id, sweep_status)):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - e.g. the store is what failed
                _after_failure(ended_by, "while stopping the sweep", exc)

    def _abort_running(self) -> None:
        """Stop what runs after an exception (Ctrl-C, SIGTERM, an error in the driver): trials
        that were running did not finish, so they go on record as INTERRUPTED, with their results
        so far, and a resume continues them from their last checkpoint."""
        for trial in self._trials:
            if trial.status == TrialStatus.RUNNING:
                self._set_status(trial, TrialStatus.INTERRUPTED)
        self._discarded.extend(self._inflight)
        self._inflight.clear()
        self._pool.destroy_running()



def _after_failure(ended_by: BaseException | None, what: str, exc: Exception) -> None:
    """Say in one line that cleaning up after the exception that ended the sweep failed too;
    nothing when that exception was the storage's own (the store, a full disk): its line says it."""
    if isinstance(ended_by, (StoreError, StorageFullError)):
        logger.debug("%s: %s", what, exc, exc_info=exc)
        return
    logger.warning("%s: %s", what, str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _blob(config: dict[str, Any]) -> bytes | None:
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
