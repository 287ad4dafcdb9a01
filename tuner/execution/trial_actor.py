"""The Ray actor that hosts one trial's trainable at a time, and can be reused for the next."""

from __future__ import annotations

import collections
import os
import signal
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tuner.execution.packed_call import unpack
from tuner.execution.protocol import ActorTiming, Report, RunReply
from tuner.storage.checkpoints import fetch_checkpoint, publish_checkpoint, upload_checkpoint, upload_target
from tuner.trainable.checkpoint import persist_checkpoint
from tuner.trainable.context import TrialInfo
from tuner.trainable.function_trainable import FunctionTrainable
from tuner.trainable.trainable import Trainable

#: Checkpoints a trial's actor uploads at once: with a store slower than that many iterations the
#: trial waits for it (each upload in flight holds its local copy until it is done).
MAX_UPLOADS = 4


class TrialError(RuntimeError):
    """A trainable failed; ``str(err)`` is its full traceback, as the store keeps it."""


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class TrialActor:
    """Hosts a Trainable inside the trial's placement group.

    The controller makes one ``run`` call at a time per actor: the first of a trial carries
    what ``start`` needs, so building the trainable and its first iteration share one round
    trip, and a failure in ``start`` surfaces from that call. The actor outlives its
    trainable, so the controller can hand it (with its placement group) to the next trial
    of the same shape instead of starting a new process.
    """

    def __init__(self, exit_quietly_on_sigterm: bool = False) -> None:
        if exit_quietly_on_sigterm:
            # Killing the actor (the sweep ends, a slot is given back) sends SIGTERM; Ray's handler
            # raises SystemExit wherever the main thread is, often inside the destructor of a rollout
            # actor's handle, which prints a traceback per trial. Nothing here needs a clean exit.
            signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
        self._trainable: Trainable | None = None
        self._info: TrialInfo | None = None
        self._start_error: str | None = None
        self._checkpoint_freq = 0
        self._trainable_cls: type[Trainable] | None = None
        # Timing for the sweep's profile, reported with run()'s results (see run).
        self._setup_s = 0.0
        self._stop_s = 0.0
        self._stopped: tuple[str, float, bool] | None = None  # (trial, seconds, in a run call) of the last cleanup
        # Checkpoints uploading to object storage while the trainable runs on, oldest first: (the
        # upload, its URI, its iteration); each confirmed by a later report or a save.
        self._uploads: collections.deque[tuple[Future[str], str, int]] = collections.deque()
        self._uploader: ThreadPoolExecutor | None = None

    def start(
        self,
        trainable_cls: type[Trainable],
        config: dict[str, Any],
        info: TrialInfo,
        checkpoint_path: str | None = None,
        checkpoint_freq: int = 0,
        reapply_config: bool = False,
        progress: tuple[int, float] | None = None,
    ) -> None:
        """Build the trainable for a trial (after cleaning up the previous one), restoring if asked.

        With ``reapply_config`` (a PBT exploit of a paused trial) the config is offered to
        ``reset_config`` after the restore, so it wins over what the checkpoint held. With
        ``progress`` (the checkpoint is a donor's) the trial's own iteration and time are set
        back after the restore.
        """
        self._discard_uploads()
        self._stop_trainable()
        began = time.perf_counter()
        self._start_error = None
        self._info = info
        self._checkpoint_freq = checkpoint_freq
        try:
            self._trainable = trainable_cls(config, trial_info=info)
            if checkpoint_path:
                self._trainable.restore(fetch_checkpoint(checkpoint_path, info))
                if reapply_config:
                    self._trainable.reset_config(dict(config))
                if progress is not None:
                    self._trainable.set_progress(*progress)
        except BaseException as exc:  # noqa: BLE001
            self._trainable = None
            self._start_error = _format(exc)
        self._setup_s += time.perf_counter() - began

    def run(
        self,
        max_results: int = 1,
        window_s: float = 0.0,
        trainable_cls: type[Trainable] | None = None,
        config: dict[str, Any] | None = None,
        info: TrialInfo | None = None,
        checkpoint_path: str | None = None,
        checkpoint_freq: int = 0,
        reapply_config: bool = False,
        progress: tuple[int, float] | None = None,
    ) -> RunReply:
        """Run iterations and return their reports, in order (``start`` first when given a class).

        With ``config`` (and ``info``) the actor first starts a trial; ``trainable_cls`` need
        only come with an actor's first trial. The first iteration always runs. A function
        trainable's later reports join it, up to ``max_results``, as long as each comes
        before ``window_s`` has passed since the call began (or was queued already): fast
        reports share one round trip, and a report is never held past the window waiting
        for the next. A class Trainable runs one ``step()`` per call: a step begun after
        the first could take any time, and the results before it would wait for it. The list
        ends early at a report the controller must decide on first (``Report.ends_a_batch``):
        a failure in the first iteration raises, one after earlier reports comes back as a
        report holding the ``error`` (the traceback), so the reports before it are not lost.
        The reply's ``timing`` is for the sweep's profile (``ActorTiming``).
        """
        began_at = time.time()
        if config is not None:
            assert info is not None
            if trainable_cls is not None:
                self._trainable_cls = trainable_cls  # sent once per actor, then reused
            if self._trainable_cls is None:
                raise TrialError("run() was given a config but this actor has no trainable class yet")
            self.start(self._trainable_cls, config, info, checkpoint_path, checkpoint_freq, reapply_config, progress)
        began = time.monotonic()
        deadline = began + window_s
        function = self._trainable if isinstance(self._trainable, FunctionTrainable) else None
        if function is None:
            max_results = 1
        elif max_results > 1:
            # Its reports queue up while this call may still take them: no hand-off per report.
            function.allow_run_ahead(max_results - 1, deadline)
        try:
            reports = [self.step()]
            while (
                len(reports) < max_results
                and not reports[-1].ends_a_batch
                and function is not None
                and function.has_result_by(deadline)
            ):
                try:
                    reports.append(self.step())
                except TrialError as exc:
                    reports.append(Report(result=None, error=str(exc)))
                    break
        finally:
            if function is not None and max_results > 1:
                function.allow_run_ahead(0, 0.0)
        step_s = time.monotonic() - began
        timing = ActorTiming(began=began_at, setup_s=self._setup_s, step_s=step_s, stop_s=self._stop_s,
                             stopped=self._stopped)
        self._setup_s = self._stop_s = 0.0
        self._stopped = None
        return RunReply(reports, timing)

    def run_packed(self, request: bytes) -> RunReply:
        """``run`` with its keyword arguments packed into one value (see ``packed_call``)."""
        return self.run(**unpack(request))

    def exploit(self, config: dict[str, Any], checkpoint_path: str, info: TrialInfo) -> bool:
        """PBT exploit: take a donor's checkpoint, then apply ``config`` on top of it.

        The donor's state is restored first and the new config applied after, so a perturbed
        learning rate wins over the one saved in the donor's optimizer state. In place through
        ``reset_config`` when the trainable accepts it (returns True), else the trainable is
        rebuilt with the new config and restored (returns False). Either way the trial keeps
        its own iteration count, so its stored curve stays one row per iteration.
        """
        if self._trainable is None or self._trainable_cls is None:
            raise TrialError("exploit() called with no running trainable")
        iteration, time_total = self._trainable.progress()
        self._discard_uploads()  # its own state goes: the controller forgets the checkpoint it awaited
        try:
            self._trainable.restore(fetch_checkpoint(checkpoint_path, info))
            self._trainable.set_trial_info(info)  # what the driver prepared for the new config
            in_place = bool(self._trainable.reset_config(dict(config)))
            if in_place:
                self._trainable.config = dict(config)
            else:
                self.start(self._trainable_cls, config, info, checkpoint_path, self._checkpoint_freq)
                if self._start_error is not None:
                    raise TrialError(self._start_error)
            assert self._trainable is not None
            self._trainable.set_progress(iteration, time_total)
            self._info = info
            self._trainable.set_trial_info(info)
            return in_place
        except TrialError:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise TrialError(_format(exc)) from None

    def update_resources(self, bundles: list[dict[str, float]], placement_groups: list[Any]) -> bool:
        """Give the running trainable its new resources in place (see ``Trainable.update_resources``);
        False when it has none running or does not take them. Runs between two iterations: calls
        on this actor run in the order the controller made them."""
        if self._trainable is None:
            return False
        try:
            return bool(self._trainable.update_resources([dict(b) for b in bundles], list(placement_groups)))
        except BaseException as exc:  # noqa: BLE001
            raise TrialError(_format(exc)) from None

    def step(self) -> Report:
        """One iteration, saved after when the iteration is a multiple of the checkpoint frequency.

        The report carries the checkpoint's path when one was written, and ``finished`` when a
        function trainable returned (no new iteration). The trainable marks those in its result
        (``_checkpoint_path``, ``_finished``, inside this process); they leave it as the report's.
        """
        if self._start_error is not None:
            raise TrialError(self._start_error)
        if self._trainable is None or self._info is None:
            raise TrialError("step() called before start()")
        try:
            result = self._trainable.train()
            reported = result.pop("_checkpoint_path", None)
            if result.pop("_finished", False):
                return Report(result=None, finished=True, checkpoint_path=self._persist(reported, result))
            if reported:
                return Report(result=result, checkpoint_path=self._persist(reported, result))
            # Uploads run beside the iterations; those done by now are confirmed (a failed one
            # fails the trial, as a synchronous upload would), before this iteration's starts.
            uploaded = self._confirm_uploads(wait=False)
            path = uploading = None
            if self._checkpoint_freq and result["training_iteration"] % self._checkpoint_freq == 0:
                path, uploading = self._periodic_checkpoint()
            return Report(result=result, checkpoint_path=path, uploaded=uploaded, uploading=uploading)
        except TrialError:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise TrialError(_format(exc)) from None

    def _persist(self, reported: str | None, result: dict[str, Any]) -> str | None:
        """A checkpoint a function trainable reported, moved into the trial's folder."""
        if not reported:
            return None
        assert self._trainable is not None and self._info is not None
        path = persist_checkpoint(reported, self._info.trial_dir, result.get("training_iteration", 0))
        self._trainable.write_metadata(path)
        path = publish_checkpoint(path, self._info)
        self._trainable.note_checkpoint(path)
        return path

    def save(self) -> str:
        """Checkpoint the trainable now; returns the checkpoint directory."""
        if self._trainable is None:
            raise TrialError("save() called with no trainable")
        try:
            return self._save()
        except BaseException as exc:  # noqa: BLE001
            raise TrialError(_format(exc)) from None

    def _save(self) -> str:
        assert self._trainable is not None and self._info is not None
        if isinstance(self._trainable, FunctionTrainable):
            return self._trainable.save("")  # its latest reported checkpoint, already persisted
        if self._uploads and self._uploads[-1][2] == self._trainable.iteration:
            # this iteration's checkpoint, uploading already: it and every earlier one, once there
            return self._confirm_uploads(wait=True)[-1][0]
        self._confirm_uploads(wait=True)  # earlier iterations' uploads: there before this save answers
        return publish_checkpoint(self._write_checkpoint(), self._info)

    def _write_checkpoint(self) -> str:
        """The trainable's checkpoint of its current iteration, in the trial's local folder."""
        assert self._trainable is not None and self._info is not None
        target = os.path.join(self._info.trial_dir, f"checkpoint_{self._trainable.iteration:06d}")
        path = self._trainable.save(target)
        if os.path.abspath(path) != os.path.abspath(target):
            path = persist_checkpoint(path, self._info.trial_dir, self._trainable.iteration)
        return path

    def _periodic_checkpoint(self) -> tuple[str | None, str | None]:
        """A ``checkpoint_freq`` checkpoint: (its path, None) once published, or, for a sweep
        whose checkpoints go to object storage, (None, its URI) while it uploads on a thread
        beside the next iteration (the report that confirms it records it)."""
        assert self._trainable is not None and self._info is not None
        if isinstance(self._trainable, FunctionTrainable):
            return self._save(), None
        path = self._write_checkpoint()
        uri = upload_target(path, self._info)
        if uri is None:
            return publish_checkpoint(path, self._info), None
        if self._uploader is None:
            self._uploader = ThreadPoolExecutor(max_workers=MAX_UPLOADS, thread_name_prefix="checkpoint-upload")
        if len(self._uploads) >= MAX_UPLOADS:  # the store is slower than the iterations: wait for it
            self._uploads[0][0].result()
        self._uploads.append((self._uploader.submit(upload_checkpoint, path, uri, self._info), uri,
                              self._trainable.iteration))
        return None, uri

    def _discard_uploads(self) -> None:
        """Uploads whose checkpoints will never be recorded (the trial takes another state, or
        ends without asking for them): let them finish, then delete them, so the bucket keeps no
        checkpoint that retention does not know of."""
        uploads, self._uploads = self._uploads, collections.deque()
        for future, uri, _ in uploads:
            try:
                future.result()
                if self._info is not None:
                    self._info.storage.delete(uri)
            except OSError:
                pass  # not there, or not deletable: nothing on record points at it

    def _confirm_uploads(self, wait: bool) -> tuple[tuple[str, int], ...]:
        """The uploads that are done, oldest first, as (URI, iteration), up to the first still
        running (``wait``: all of them, waited for). A failed upload raises its error."""
        done = []
        while self._uploads and (wait or self._uploads[0][0].done()):
            future, uri, iteration = self._uploads[0]
            future.result()
            self._uploads.popleft()
            done.append((uri, iteration))
        return tuple(done)

    def stop(self) -> None:
        """Clean up the current trainable; the actor stays, ready for another trial."""
        self._discard_uploads()
        self._stop_trainable(in_call=False)

    def _stop_trainable(self, in_call: bool = True) -> None:
        """Clean up the trainable; ``in_call``: inside the next trial's run (else on its own, while
        the actor is idle between trials)."""
        trainable, self._trainable = self._trainable, None
        if trainable is not None:
            began = time.perf_counter()
            try:
                trainable.stop()
            finally:
                seconds = time.perf_counter() - began
                if in_call:
                    self._stop_s += seconds
                if self._info is not None:
                    self._stopped = (self._info.trial_id, seconds, in_call)
