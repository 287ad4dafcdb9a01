"""Runs a user's ``train(config)`` function as a Trainable: each ``tune.report`` is one step."""

from __future__ import annotations

import inspect
import threading
import time
import traceback
from typing import Any, Callable

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
    and ``_finished=True`` (no new iteration).
    """

    _func: Callable[..., Any]

    def setup(self, config: dict[str, Any]) -> None:
        # Hand-off between step() and the function's thread: the function posts one item and
        # releases ``_posted``; it then waits on ``_resume``, which step() releases to let it on.
        self._item: Any = None
        self._posted = threading.Lock()
        self._posted.acquire()
        self._resume = threading.Lock()
        self._resume.acquire()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._restore_checkpoint: Checkpoint | None = None
        self._last_step_end = time.time()

    # Called from the user's thread through tune.report.
    def _report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        if self._stopping:
            raise StopTrial()
        self._post((metrics, checkpoint))
        self._resume.acquire()
        if self._stopping:
            raise StopTrial()

    def _post(self, item: Any) -> None:
        self._item = item
        self._posted.release()

    def _run(self) -> None:
        session._bind(self)
        try:
            params = inspect.signature(self._func).parameters
            if params:
                self._func(dict(self.config))
            else:
                self._func()
        except StopTrial:
            pass
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the controller
            self._post(_Failure(exc))
            return
        self._post(_FINISHED)

    def step(self) -> dict[str, Any]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tune-function", daemon=True)
            self._thread.start()
        else:
            self._resume.release()
        self._posted.acquire()
        item = self._item
        if item is _FINISHED:
            return {"done": True, "_finished": True}
        if isinstance(item, _Failure):
            raise _TrialFunctionError(item.text) from item.exc
        metrics, checkpoint = item
        if checkpoint is not None:
            metrics = dict(metrics)
            metrics["_checkpoint_path"] = checkpoint.path
        return metrics

    def train(self) -> dict[str, Any]:
        start = self._last_step_end
        result = self.step()
        now = time.time()
        self._last_step_end = now
        if result.get("_finished"):
            return result
        return self._complete_result(result, now - start)

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
            self._stopping = True
            if self._resume.locked():
                self._resume.release()
            thread.join(timeout=10)
        session._bind(None)


class _TrialFunctionError(RuntimeError):
    """The user's function raised; the message is its full traceback."""


def wrap_function(func: Callable[..., Any]) -> type[FunctionTrainable]:
    """A FunctionTrainable subclass that runs ``func``, named after it."""
    name = getattr(func, "__name__", type(func).__name__)
    module = getattr(func, "__module__", None) or __name__
    return type(name, (FunctionTrainable,), {"_func": staticmethod(func), "__module__": module})


def is_function_trainable(obj: Any) -> bool:
    return callable(obj) and not (inspect.isclass(obj) and issubclass(obj, Trainable))


def trainable_name(obj: Any) -> str:
    return getattr(obj, "__name__", type(obj).__name__)

