"""Runs a user's ``train(config)`` function as a Trainable: each ``tune.report`` is one step."""

from __future__ import annotations

import collections
import inspect
import threading
import time
import traceback
from typing import Any, Callable, Generator, Mapping

from tuner.trainable import session
from tuner.trainable.checkpoint import Checkpoint
from tuner.trainable.trainable import Trainable

_FINISHED = object()


class StopTrial(BaseException):
    """Raised inside the user's function by ``tune.report`` when the trial was stopped.

    A BaseException so that a user's ``except Exception`` does not swallow it.
    """


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class FunctionTrainable(Trainable):
    """Wraps ``func(config)``; the function runs in a thread and pauses in each report.

    ``step()`` lets the function run until its next ``tune.report`` and returns that
    report; when the function returns, ``step()`` returns a result with ``done=True``
    and ``_finished=True`` (no new iteration). A generator function reports what it
    yields: each ``yield {...}`` is one ``tune.report({...})``, as in Ray Tune.

    The trial actor may let the function run ahead (:meth:`allow_run_ahead`): then a report
    is queued and the function goes on at once, without waiting for ``step()`` to take it,
    as long as the allowance lasts. A report with a checkpoint, or with ``done``, always
    waits, so no iteration runs past one before it has been decided on. An iteration the
    function began within the allowance is finished after it ends: its report waits, queued,
    for the next ``step()`` (or is dropped if the trial is stopped). :meth:`has_result_by`
    lets the actor wait for a report only until a deadline, so a report that is not followed
    by another soon is handed on at once instead of being held until the next one.
    """

    _func: Callable[..., Any]

    def setup(self, config: dict[str, Any]) -> None:
        # Hand-off between step() and the function's thread, under ``_cond``: the function
        # appends items (reports, then _FINISHED or a _Failure) to ``_items``; a report it may
        # not run past sets ``_blocked`` and waits until step() sets ``_resumed``.
        self._cond = threading.Condition(threading.Lock())
        self._items: collections.deque[Any] = collections.deque()
        self._blocked = False
        self._resumed = False
        self._ahead = 0  # reports the function may still make without waiting ...
        self._ahead_until = 0.0  # ... before this time.monotonic()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._restore_checkpoint: Checkpoint | None = None
        self._last_report_at = time.time()

    def allow_run_ahead(self, results: int, until: float) -> None:
        """Let the function make up to ``results`` more reports without waiting for ``step()``,
        until ``time.monotonic()`` reaches ``until``; ``allow_run_ahead(0, 0.0)`` ends it."""
        with self._cond:
            self._ahead, self._ahead_until = results, until

    # Called from the user's thread through tune.report.
    def _report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        with self._cond:
            if self._stopping:
                raise StopTrial()
            self._items.append((metrics, checkpoint, time.time()))
            self._cond.notify()
            if (
                self._ahead > 0
                and checkpoint is None
                and not metrics.get("done")
                and time.monotonic() < self._ahead_until
            ):
                self._ahead -= 1
                return
            self._blocked, self._resumed = True, False
            while not self._resumed and not self._stopping:
                self._cond.wait()
            self._blocked = False
            if self._stopping:
                raise StopTrial()

    def _post(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify()

    def _run(self) -> None:
        session._bind(self)
        try:
            params = inspect.signature(self._func).parameters
            returned = self._func(dict(self.config)) if params else self._func()
            if inspect.isgenerator(returned):
                self._report_yields(returned)
            elif isinstance(returned, Mapping) and returned:  # as in Ray Tune: the last result
                self._report(dict(returned), None)
            elif inspect.iscoroutine(returned):
                returned.close()
                raise TypeError("the trainable is an async function: tune.run runs plain functions; "
                                "call asyncio.run(...) inside a plain one")
        except StopTrial:
            pass
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the controller
            self._post(_Failure(exc))
            return
        self._post(_FINISHED)

    def _report_yields(self, generator: Generator[Any, Any, Any]) -> None:
        """Report each dict a generator function yields; a bare ``yield`` reports nothing."""
        try:
            for value in generator:
                if value is None:
                    continue
                if not isinstance(value, Mapping):
                    raise TypeError(
                        f"a generator trainable must yield dicts of metrics (each yield is one "
                        f"tune.report), got {type(value).__name__}: {value!r}"
                    )
                self._report(dict(value), None)
        finally:
            generator.close()  # a stopped trial unwinds the generator: its finally blocks run

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tune-function", daemon=True)
        self._thread.start()

    def _next_item(self) -> Any:
        with self._cond:
            if self._thread is None:
                self._start_thread()
            elif not self._items and self._blocked:
                self._resumed = True
                self._cond.notify()
            while not self._items:
                self._cond.wait()
            return self._items.popleft()

    def has_result_by(self, deadline: float) -> bool:
        """Wait until the function has a report (or its end) for ``step()`` to take, but no
        later than ``time.monotonic()`` reaches ``deadline``; True if one is there.

        A function waiting in a report is let go on only before the deadline, so no iteration
        starts after it; an iteration still running at the deadline goes on, and its report
        waits, queued, for a later ``step()``.
        """
        with self._cond:
            if self._items:
                return True
            if time.monotonic() >= deadline:
                return False
            if self._thread is None:
                self._start_thread()
            elif self._blocked:
                self._resumed = True
                self._cond.notify()
            while not self._items:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def step(self) -> dict[str, Any]:
        item = self._next_item()
        if item is _FINISHED:
            return {"done": True, "_finished": True}
        if isinstance(item, _Failure):
            raise _TrialFunctionError(item.text) from item.exc
        metrics, checkpoint, reported_at = item
        metrics = dict(metrics)
        metrics["_reported_at"] = reported_at
        if checkpoint is not None:
            metrics["_checkpoint_path"] = checkpoint.path
        return metrics

    def train(self) -> dict[str, Any]:
        result = self.step()
        if result.get("_finished"):
            return result
        # Timed from report to report, in the function's thread: exact when it ran ahead.
        reported_at = result.pop("_reported_at")
        elapsed, self._last_report_at = reported_at - self._last_report_at, reported_at
        return self._complete_result(result, elapsed, timestamp=reported_at)

    def save(self, checkpoint_dir: str) -> str:
        """A function trainable cannot checkpoint on demand: return its latest reported checkpoint."""
        if self._latest_checkpoint is None:
            raise RuntimeError(
                "this function trainable has reported no checkpoint; pass checkpoint= to tune.report "
                "to make it pausable and restartable"
            )
        return self._latest_checkpoint

    def restore(self, checkpoint_dir: str) -> None:
        """The function reads the checkpoint itself through ``tune.get_checkpoint()``."""
        super().restore(checkpoint_dir)
        self._restore_checkpoint = Checkpoint(checkpoint_dir)

    def cleanup(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
            thread.join(timeout=10)
        session._bind(None)


class _TrialFunctionError(RuntimeError):
    """The user's function raised; the message is its full traceback."""


def wrap_function(func: Callable[..., Any]) -> type[FunctionTrainable]:
    """A FunctionTrainable subclass that runs ``func``, named after it."""
    name = getattr(func, "__name__", type(func).__name__)
    module = getattr(func, "__module__", None) or __name__
    return type(name, (FunctionTrainable,), {"_func": staticmethod(func), "__module__": module})
