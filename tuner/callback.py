"""Callbacks: code that follows a sweep from the driver (loggers, exporters, progress output).

The hook names and arguments are Ray Tune's (``ray.tune.Callback``), so a logger written for
Ray Tune ports by changing its import. Hooks run in the driver, in the controller's loop, after
the result or event they describe is queued for the store; a hook that raises is reported with
the callback's name and does not stop the sweep or lose results.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

logger = logging.getLogger(__name__)

HOOKS = (
    "setup",
    "on_step_begin",
    "on_step_end",
    "on_trial_start",
    "on_trial_result",
    "on_trial_complete",
    "on_trial_error",
    "on_checkpoint",
    "on_experiment_end",
)


class Callback:
    """Override the hooks you need. ``iteration`` counts the controller's loop passes.

    Example:
        >>> class PrintBest(Callback):
        ...     def on_trial_complete(self, iteration, trials, trial, **info):
        ...         print(trial.trial_id, trial.last_result)
    """

    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        """Called once before the first trial starts. ``info`` holds experiment_name, run_dir,
        metric, mode, search_space and experiment_id."""

    def on_step_begin(self, iteration: int, trials: Sequence[Any], **info: Any) -> None:
        """A pass of the controller's loop begins."""

    def on_step_end(self, iteration: int, trials: Sequence[Any], **info: Any) -> None:
        """A pass of the controller's loop ended (the progress output reports here)."""

    def on_trial_start(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        """A trial started, or resumed after a pause or failure."""

    def on_trial_result(self, iteration: int, trials: Sequence[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        """A trial reported ``result`` (each result once, in order per trial)."""

    def on_trial_complete(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        """A trial ended successfully (finished, or stopped by a stop condition or scheduler)."""

    def on_trial_error(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        """A trial failed for good (no retries left)."""

    def on_checkpoint(self, iteration: int, trials: Sequence[Any], trial: Any, checkpoint: Any,
                      **info: Any) -> None:
        """A checkpoint of ``trial`` was persisted."""

    def on_experiment_end(self, trials: Sequence[Any], **info: Any) -> None:
        """The sweep ended (after the last result was stored)."""

    def on_note(self, text: str, **info: Any) -> None:
        """A line the sweep says once, such as how it packed its trials (``pack_trials``); the
        progress lines of ``verbose`` >= 1 print it too, a display of its own shows it here."""


class CallbackList:
    """Calls a hook on every callback; a callback that raises is logged by name, once per hook."""

    def __init__(self, callbacks: Sequence[Callback] | None) -> None:
        callbacks = list(callbacks or [])
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise ValueError(f"callbacks: each callback must be a tune.Callback, got {type(cb).__name__}")
        self._callbacks = callbacks
        self._failed: set[tuple[int, str]] = set()

    def __bool__(self) -> bool:
        return bool(self._callbacks)

    def add(self, callback: Callback) -> None:
        self._callbacks.append(callback)

    def call(self, hook: str, *args: Any, **kwargs: Any) -> None:
        for cb in self._callbacks:
            try:
                getattr(cb, hook)(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a logger must not take the sweep down
                key = (id(cb), hook)
                if key not in self._failed:
                    self._failed.add(key)
                    logger.error("callback %s raised in %s: %r (the sweep goes on; results are stored)",
                                 type(cb).__name__, hook, exc, exc_info=exc)

    @property
    def errors(self) -> list[tuple[str, str]]:
        """(callback class name, hook) of every hook that raised."""
        names = {id(cb): type(cb).__name__ for cb in self._callbacks}
        return [(names.get(i, "?"), hook) for i, hook in sorted(self._failed)]
