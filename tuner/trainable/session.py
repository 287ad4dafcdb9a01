"""The in-trial session behind ``tune.report``, ``tune.get_checkpoint`` and ``tune.get_context``."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Mapping

from tuner.trainable.checkpoint import Checkpoint
from tuner.trainable.context import TrainContext, TrialInfo

if TYPE_CHECKING:
    from tuner.trainable.function_trainable import FunctionTrainable


class _SessionState(threading.local):
    trainable: "FunctionTrainable | None" = None


_state = _SessionState()
_process_trainable: "FunctionTrainable | None" = None
_process_info: TrialInfo | None = None  # the trial a class Trainable of this process runs
_lock = threading.Lock()


def _set_trial_info(info: TrialInfo | None) -> None:
    """Record the trial this process runs (any trainable: ``get_context`` works in class Trainables too)."""
    global _process_info
    _process_info = info


def _bind(trainable: "FunctionTrainable | None") -> None:
    """Make ``trainable`` the session of the calling thread (and of the process, for user threads)."""
    global _process_trainable
    _state.trainable = trainable
    with _lock:
        _process_trainable = trainable


def _current() -> "FunctionTrainable":
    trainable = _state.trainable or _process_trainable
    if trainable is None:
        raise RuntimeError(
            "tune.report/get_checkpoint/get_context called outside a trial: "
            "call them from a function passed to tune.run"
        )
    return trainable


def report(metrics: Mapping[str, Any] | None = None, *, checkpoint: Checkpoint | None = None, **kwargs: Any) -> None:
    """Report one iteration's metrics (and optionally a checkpoint) from a function trainable.

    Blocks until the controller asks for the next iteration, except for fast iterations within
    the trial actor's batch window, which go on at once (see ``FunctionTrainable``); raises to
    unwind the function when the scheduler stopped the trial. The metrics are copied, so the
    function may reuse its dict. ``tune.report(score=1.0)`` (keywords) works too.
    """
    if metrics is not None and not isinstance(metrics, Mapping):
        raise TypeError(f"tune.report: metrics must be a dict, got {type(metrics).__name__}")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"tune.report: checkpoint must be a tune.Checkpoint, got {type(checkpoint).__name__}")
    merged = dict(metrics or {})
    merged.update(kwargs)
    _current()._report(merged, checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint this trial should resume from (after a failure or pause), else None."""
    return _current()._restore_checkpoint


def get_context() -> TrainContext:
    """The running trial's id, name and directory (in a function or a class Trainable)."""
    trainable = _state.trainable or _process_trainable
    info: TrialInfo | None = trainable.get_trial_info() if trainable is not None else _process_info
    if trainable is None and info is None:
        _current()  # raises: not inside a trial
    if info is None:
        info = TrialInfo(trial_id="default", trial_name="default", trial_dir=".", experiment_name="default")
    return TrainContext(info)
