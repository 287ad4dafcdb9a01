"""The driver-side event loop of a sweep: starts trials, collects results, applies decisions.

One loop, never blocking on one trial: every call to a trial actor is in flight at once and
``ray.wait`` returns whichever finish first. Each trial owns one placement group; when a trial
ends its actor and group are handed to the next trial of the same shape, so a sweep of many
short trials does not pay for a new Ray worker process per trial (see ``slots``). Ray itself is
reached through a ``Backend`` (see ``backend``), so the decisions can be tested without it.

The loop and the decisions are here; each other job is a component of its own: the surface
a scheduler calls and its rules (``schedulers.control``), new trials from the searcher
(``trial_source``), requests to trial actors (``actor_requests``) and their calls in flight
(``calls``), the store's writes (``sweep_record``), checkpoints (``trial_checkpoints``), checks on
a result (``result_checks``), resource changes (``resource_changes``), PBT's handshake (``exploits``).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from schedulers.control import ResizingControl
from schedulers.resource_changing import Bundles
from schedulers.trial_scheduler import TrialScheduler
from schedulers.trial_status import ENDED, TrialStatus
from tuner.callback import CallbackList
from tuner.execution.backend import Backend, CallFailed
from tuner.execution.actor_requests import RESULT_BATCH_MAX, ActorRequests
from tuner.execution.calls import Calls
from tuner.execution import signals
from tuner.execution.budget import budget_cut, save_budget_cut, warn_silent_trials
from tuner.execution.checkpoint_manager import CheckpointManager
from tuner.execution.exploits import Exploit, ExploitBook
from tuner.execution.profiler import SweepProfiler
from tuner.execution.protocol import Call, Report, RunReply
from tuner.execution.progress import ProgressReporter
from tuner.execution.resource_changes import ResourceChanges
from tuner.execution.resources import PlacementGroupFactory, check_feasible
from tuner.execution.result_checks import ResultCheck
from tuner.execution.resume import StoredSweep, replay
from tuner.execution.slots import SlotPool
from tuner.execution.sweep_record import SweepRecord, after_failure
from tuner.execution.trial import Trial
from tuner.execution.trial_checkpoints import TrialCheckpoints
from tuner.execution.trial_naming import TrialNamer
from tuner.execution.trial_source import TrialSource
from tuner.flatten import flat_result
from tuner.run_options import RunOptions
from tuner.search.searcher import Searcher
from tuner.stopper import Stopper
from tuner.errors import StorageFullError, disk_full_line
from tuner.storage import Storage
from tuner.store import Store, StoreError
from tuner.sweep_status import SweepStatus
from tuner.trainable.checkpoint import Checkpoint
from tuner.trainable.function_trainable import FunctionTrainable
from tuner.trainable.trainable import Trainable

logger = logging.getLogger(__name__)

# How long a sweep that ends waits for the answers it no longer wants (its actors are dead by then).
DISCARD_WAIT_S = 2.0


class Controller(ResizingControl):
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
        self._scheduler = scheduler
        self._stopper = stopper
        self._resources_for = resources_for
        self._options = options
        self._callbacks = callbacks if callbacks is not None else CallbackList([])  # the sweep's own list
        if reporter is not None:  # the progress output is a callback like any other
            self._callbacks.add(reporter)
        self._namer = trial_namer
        self._failed_fast = False  # a trial failed for good under fail_fast: stop everything
        self._callback_info = dict(callback_info or {})
        self._profiler = profiler
        self._iteration = 0  # loop passes, the ``iteration`` callbacks see

        self._trials: list[Trial] = []
        self._record = SweepRecord(store, experiment_id, profiler)
        self._source = TrialSource(searcher, max_trials, self._record.timed)
        self._pool = SlotPool(backend, cpu_share=options.cpu_share)  # Ray's unless a backend is given
        self._backend = self._pool.backend
        self._calls = Calls(self._backend)
        self._checkpoints = TrialCheckpoints(checkpoint_manager or CheckpointManager(store, experiment_id, run_dir),
                                             self._record, self._pool, experiment_name, storage,
                                             trials=lambda: self._trials, landed=self._on_checkpoint,
                                             function_trainable=self._is_function, pinned=lambda: self._exploits.pinned())
        # Fast iterations may share a round trip when no decision can depend on the exact
        # state after one: the scheduler never pauses and no end checkpoint is taken.
        batch = RESULT_BATCH_MAX if scheduler.never_pauses and not options.checkpoint_at_end else 1
        self._actors = ActorRequests(self._pool, self._calls, self._checkpoints, trainable_cls, batch=batch,
                                     checkpoint_freq=options.checkpoint_freq)
        self._resources = ResourceChanges(self._pool, self._calls, trainable_cls, self._actors.prepared,
                                          self._checkpoints.cannot_save, profiler)
        self._stop_everything = False
        self._budget_spent = False  # the time budget stopped the sweep (see ``budget``)
        self._result_check = ResultCheck(options.metric, stopper)
        self._start_time = 0.0
        self._exploits = ExploitBook()  # PBT's checkpoints and exploits in flight
        self._seen: dict[str, int] = {}  # trial_id -> last iteration the decisions were made on

    # -- what schedulers may ask (the rules: schedulers/control.py) ----------------------------
    def get_trials(self) -> list[Trial]:
        return list(self._trials)

    def _stop(self, trial: Trial) -> None:
        self._searcher_complete(trial, pruned=True)
        if trial.status == TrialStatus.RUNNING:
            self._end_trial(trial, TrialStatus.TERMINATED)
        else:
            self._set_status(trial, TrialStatus.TERMINATED)

    def _checkpoint(self, trial: Trial) -> None:
        """Checkpoint ``trial`` after its current result, so it can be a PBT donor (not a function
        that has reported no checkpoint: it has none to give, and an exploit from it is skipped)."""
        if not self._checkpoints.cannot_save(trial, "be checkpointed for an exploit"):
            self._exploits.ask_checkpoint(trial.trial_id)

    def _has_checkpoint(self, donor: Trial) -> bool:
        """A checkpoint the donor was just asked for, or the one its pause is saving, counts: the
        exploit waits for it (the trial holds its actor meanwhile, or is not started)."""
        return bool(donor.checkpoint_path) or self._exploits.saving(donor.trial_id) or self._pausing(donor)

    def _exploit(self, trial: Trial, donor: Trial, new_config: dict[str, Any]) -> None:
        self._exploits.ask_exploit(trial.trial_id, donor, new_config, donor_pausing=self._pausing(donor))

    def _exploit_skipped(self, trial: Trial, donor: Trial) -> None:
        logger.warning("exploit skipped: donor %s has no checkpoint (it %s without one); %s keeps its own "
                       "state and config", donor.trial_name, "ended" if donor.status in ENDED else "is",
                       trial.trial_name)

    def _pausing(self, trial: Trial) -> bool:
        return self._calls.pausing(trial)

    def _runs_on_after_pause(self, trial: Trial) -> bool:
        return trial.status == TrialStatus.RUNNING and self._checkpoints.unsavable(trial)

    def cluster_resources(self) -> dict[str, float]:
        return self._resources.cluster_resources()

    def _resize(self, trial: Trial, bundles: Bundles) -> str:
        return self._resources.resize(trial, bundles)

    def adopt(self, sweep: StoredSweep) -> None:
        """Continue a stored sweep (before ``run``): its trials, and replay what the stored
        scheduler and searcher state had not seen yet."""
        self._trials = list(sweep.trials)
        if self._namer:
            for trial in self._trials:
                self._namer(trial)
        self._seen = replay(sweep, self, self._scheduler, self._source)
        self._exploits.clear_saves()  # asked of trials that are not running: nothing to wait for
        self._result_check.keys_found = self._result_check.keys_found or any(t.last_result for t in self._trials)

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
                self._record.flush_results()
                self._save_state(force=True)
                warn_silent_trials(self._experiment_name, self._trials)
                self._record.sweep_status(self._end_status())
        except BaseException as exc:
            failed, ended_by = True, exc
            # A store that fails (full, read-only, gone) cut the sweep short: resumable, like a signal.
            interrupted = isinstance(exc, (KeyboardInterrupt, signals.SweepTerminated, StoreError, StorageFullError))
            self._record.abort(SweepStatus.INTERRUPTED if interrupted else SweepStatus.ERROR, exc,
                               stop_running=self._abort_running)
            raise
        finally:
            if self._profiler is not None:
                self._profiler.loop_end()  # trials still holding resources give them back
            self._pool.destroy_all()
            self._calls.read_discarded(DISCARD_WAIT_S)
            self._checkpoints.close()
            try:
                self._record.save_profiles()
                self._record.flush()
            except Exception as exc:  # noqa: BLE001 - never raised over the exception that ended the sweep
                if not failed:
                    raise
                after_failure(ended_by, "could not save the sweep's last writes", exc)
            # ended_by: what cut the sweep short (None: it ran to its end), for callbacks that
            # would otherwise say again what the sweep's own error says.
            self._callbacks.call("on_experiment_end", self._trials, ended_by=ended_by)
        return list(self._trials)

    def _finished(self) -> bool:
        if self._calls or self._pool.running:
            return False
        if self._stop_everything:
            return True
        if not self._source.finished or any(t.status == TrialStatus.PENDING for t in self._trials):
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
        over_time = self._options.time_budget_s is not None and time.monotonic() - self._start_time >= self._options.time_budget_s
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

    def _end_status(self) -> SweepStatus:
        """The sweep's status once the loop ended: INCOMPLETE when the time budget left trials
        that never ran (logged, and noted in the store for the CLI and analysis), else TERMINATED."""
        cut = None
        if self._budget_spent:
            cut = budget_cut(float(self._options.time_budget_s or 0.0), self._source.left(len(self._trials)), self._trials)
        if cut is not None:
            logger.warning("sweep %s: %s", self._experiment_name, cut.line("a resume (resume=True)"))
        save_budget_cut(self._record.store, self._experiment_id, cut)
        return SweepStatus.INCOMPLETE if cut is not None else SweepStatus.TERMINATED

    # -- adding and starting trials ----------------------------------------------------------------
    def _fill(self) -> None:
        while not self._stop_everything:
            with self._record.timed("scheduler"):
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
        most = self._options.max_concurrent_trials
        return not most or len(self._pool.running) < most

    def _add_trial_from_searcher(self) -> bool:
        proposal = self._source.propose(len(self._trials), live=lambda: any(
            t.status in (TrialStatus.PENDING, TrialStatus.PAUSED, TrialStatus.RUNNING) for t in self._trials))
        if proposal is None:
            return False
        trial_id, config = proposal
        if self._options.metric:
            self._trainable_cls.check_metric(self._options.metric, config)
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
            trial.placement_group_factory = pgf = self._resources_for(trial.config)
            check_feasible(pgf, self._pool.nodes, f"resources of trial {trial.trial_name}")
        self._record.new_trial(trial, self._state)  # with the searcher state that made it
        return True

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
        self._actors.start(trial, slot, reapply_config)
        return True

    # -- answers from trial actors ---------------------------------------------------------------
    def _wait_and_process(self, timeout: float) -> None:
        if not self._calls:
            if self._pool.running or not self._finished():
                time.sleep(min(timeout, 0.01))
        for trial, kind, value in self._calls.answers(timeout):
            if isinstance(value, CallFailed):
                self._on_trial_failure(trial, value.error, value.actor_died)
            elif kind is Call.RUN:
                self._on_results(trial, value)
            elif kind is Call.RESOURCES:
                self._resources.updated(trial, value)
            else:
                self._on_saved(trial, value, then=kind)
        self._record.flush_results()

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
        if exploit is not None:
            self._actors.exploit(trial, self._record_exploit(trial, exploit))
        if self._exploits.take_checkpoint_request(trial.trial_id):
            self._actors.save(trial, Call.CHECKPOINT)
        self._actors.run(trial)  # actor calls run in order: exploit, save, then the next iterations

    def _record_exploit(self, trial: Trial, exploit: Exploit) -> str:
        """Apply a requested exploit to the trial's record (config, checkpoint) and store its lineage."""
        donor, new_config, checkpoint = exploit.donor, exploit.config, exploit.checkpoint
        assert checkpoint is not None  # take_exploit hands out bound exploits only
        self._record.exploit(trial, donor.trial_id, checkpoint, new_config)  # before the trial takes it
        time_total = float((trial.last_result or {}).get("time_total_s", 0.0))
        # Its own checkpoint (a PBT replay changing its config) holds its own counters already.
        trial.own_progress = None if donor is trial else (trial.iteration, time_total)
        trial.config = new_config
        trial.checkpoint_path = checkpoint
        trial.pending_uploads.clear()  # its own state goes: the actor drops those uploads
        return checkpoint

    def _save_state(self, force: bool = False) -> None:
        """Store the scheduler's and searcher's state (every couple of seconds, and at the end)."""
        self._record.save_state(self._state, force)

    def _state(self) -> dict[str, Any]:
        return {"controller": {"seen": self._seen, "told_ended": sorted(self._source.told_ended)},
                "scheduler": self._scheduler, "searcher": self._source.searcher}

    # -- results and decisions -------------------------------------------------------------------
    def _on_step_result(self, trial: Trial, report: Report) -> bool:
        """Record one report and act on the decisions it brings; True if the trial goes on."""
        checkpoint_path = report.checkpoint_path
        if report.finished or report.result is None:
            if checkpoint_path:
                self._checkpoints.landed(trial, checkpoint_path)
            self._complete_trial(trial)
            return False
        result = report.result
        flat = flat_result(result)
        self._result_check(trial.trial_name, flat)
        trial.last_result = result
        trial.last_flat_result = flat
        iteration = int(result["training_iteration"])
        self._record.result(trial.trial_id, iteration, result)
        if checkpoint_path:
            self._checkpoints.landed(trial, checkpoint_path)
        for uri, _ in report.uploaded:
            self._checkpoints.landed(trial, uri)
        if report.uploading:
            trial.pending_uploads.append((report.uploading, iteration, result))
        if iteration <= self._seen.get(trial.trial_id, 0):
            return True  # re-run after a restore from an older checkpoint: decided on already
        self._seen[trial.trial_id] = iteration
        if self._callbacks:
            with self._record.timed("callbacks"):
                self._callbacks.call("on_trial_result", self._iteration, self._trials, trial, result)
        self._source.result(trial.trial_id, flat)
        if result.get("done") or self._stopper(trial.trial_id, flat):
            self._complete_trial(trial)
            return False
        if self._stop_everything:
            self._end_trial(trial, TrialStatus.TERMINATED)
            return False
        with self._record.timed("scheduler"), self.deciding(trial):
            decision = self._scheduler.on_trial_result(self, trial, flat)
        if decision == TrialScheduler.CONTINUE:
            return True
        if decision == TrialScheduler.STOP:
            self._searcher_complete(trial, pruned=not self._scheduler.stop_means_complete(trial, flat))
            self._scheduler.on_trial_remove(self, trial)
            self._end_trial(trial, TrialStatus.TERMINATED, durable=True)
        elif decision == TrialScheduler.PAUSE:
            if self._checkpoints.cannot_save(trial, "pause"):
                return True  # it keeps running, as Ray Tune's would restart it: no result lost
            self._actors.save(trial, Call.PAUSE)
        else:
            raise ValueError(
                f"{type(self._scheduler).__name__}.on_trial_result returned {decision!r}; "
                f"expected one of {list(TrialScheduler.DECISIONS)}"
            )
        return False

    def _complete_trial(self, trial: Trial) -> None:
        """The trial finished on its own (its function returned, done=True, or a stop condition)."""
        self._scheduler.on_trial_complete(self, trial, trial.last_flat_result)
        self._searcher_complete(trial)
        self._end_trial(trial, TrialStatus.TERMINATED)

    def _searcher_complete(self, trial: Trial, *, pruned: bool = False, error: bool = False) -> None:
        self._source.ended(trial.trial_id, trial.last_flat_result, pruned=pruned, error=error)

    def _end_trial(self, trial: Trial, status: TrialStatus, durable: bool = False) -> None:
        """End a trial; with ``durable`` its status (and results so far) are committed before
        its actor is let go, so a driver that dies right after cannot lose the decision."""
        self._drop_inflight(trial)
        want_save = (
            status == TrialStatus.TERMINATED
            and self._options.checkpoint_at_end
            and not self._is_function
            and trial.last_result is not None
            and not (trial.checkpoint_path or "").endswith(f"checkpoint_{trial.iteration:06d}")
        )
        # A checkpoint still uploading is waited for (the save answers with it) and recorded.
        uploading = status == TrialStatus.TERMINATED and bool(trial.pending_uploads)
        if (want_save or uploading) and trial.trial_id in self._pool.running:
            self._actors.save(trial, Call.END)
            return
        trial.pending_uploads.clear()  # the actor deletes them: nothing on record will point at them
        self._set_status(trial, status)
        if durable:
            self._record.make_durable()
        self._release_slot(trial)

    def _on_saved(self, trial: Trial, value: Any, then: Call) -> None:
        """A save (or exploit) the controller asked for is done; ``then`` says what it was for."""
        if then is Call.EXPLOIT:
            return
        self._checkpoints.landed(trial, value)
        waiting = self._exploits.saved(trial.trial_id)  # a pause save is also the checkpoint asked for
        if waiting is not None:
            self._go_on(waiting)
        if then is Call.CHECKPOINT:
            return
        self._set_status(trial, TrialStatus.PAUSED if then is Call.PAUSE else TrialStatus.TERMINATED)
        if then is Call.PAUSE:
            self._record.make_durable()
        self._release_slot(trial)

    def _on_checkpoint(self, trial: Trial, path: str) -> None:
        if self._callbacks:
            self._callbacks.call("on_checkpoint", self._iteration, self._trials, trial, Checkpoint(path))

    def _set_status(self, trial: Trial, status: TrialStatus) -> None:
        trial.status = status
        fields: dict[str, Any] = {}
        if status == TrialStatus.TERMINATED:  # finished: trimmed to its num_to_keep best checkpoints
            moved = self._checkpoints.finish(trial)
            if moved is not None:
                fields["checkpoint_path"] = moved
        self._record.status(trial, **fields)
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
        self._record.failure(trial)
        logger.warning("trial %s failed (%d time(s)):\n%s", trial.trial_name, trial.num_failures, trial.error)
        self._drop_inflight(trial)
        self._resources.reset(trial)
        if actor_died:
            self._profile_release(trial)
            self._pool.discard(trial.trial_id)
        else:
            self._release_slot(trial)
        retry = self._options.max_failures < 0 or trial.num_failures <= self._options.max_failures
        if retry and not self._stop_everything:
            self._set_status(trial, TrialStatus.PENDING)
            return
        self._set_status(trial, TrialStatus.ERROR)
        self._scheduler.on_trial_error(self, trial)
        self._searcher_complete(trial, error=True)
        self._failed_fast = self._failed_fast or bool(self._options.fail_fast)

    def _drop_inflight(self, trial: Trial) -> None:
        """Forget calls still in flight for ``trial``: their answers no longer matter."""
        self._calls.drop(trial)
        self._go_on(self._exploits.forget(trial.trial_id))  # it will not be a donor after all

    def _go_on(self, trials: list[Trial]) -> None:
        """Trials that waited for a donor's checkpoint go on (with it, or without if none came)."""
        for trial in trials:
            if trial.status == TrialStatus.RUNNING and trial.trial_id in self._pool.running:
                self._continue_trial(trial)

    # -- slots -------------------------------------------------------------------------------------
    def _release_slot(self, trial: Trial) -> None:
        self._resources.reset(trial)
        self._profile_release(trial)
        # Free what the trainable holds (rollout actors, say) now. A function trainable
        # holds nothing but its thread, which the actor's next start or exit ends.
        self._pool.release(trial.trial_id, stop_trainable=not self._is_function)

    def _profile_release(self, trial: Trial) -> None:
        """The trial gave its resources back: account its time (stored with the next state save)."""
        if self._profiler is not None:
            self._profiler.release(trial.trial_id)

    def _abort_running(self) -> None:
        """Stop what runs after an exception (Ctrl-C, SIGTERM, an error in the driver): trials
        that were running did not finish, so they go on record as INTERRUPTED, with their results
        so far, and a resume continues them from their last checkpoint."""
        for trial in self._trials:
            if trial.status == TrialStatus.RUNNING:
                self._set_status(trial, TrialStatus.INTERRUPTED)
        self._calls.drop_all()
        self._pool.destroy_running()
