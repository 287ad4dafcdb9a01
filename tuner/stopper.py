"""Stop conditions for trials and whole experiments (Ray Tune's ``tune.stopper`` names)."""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Mapping

from schedulers.validation import is_number


class Stopper:
    """Decides when a trial (``__call__``) or the whole experiment (``stop_all``) stops."""

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return False


class NoopStopper(Stopper):
    """Never stops anything."""


class FunctionStopper(Stopper):
    """Wraps ``fn(trial_id, result) -> bool``; a function that cannot be called so is a ValueError
    naming ``stop``, raised here, before any trial runs."""

    def __init__(self, function: Callable[[str, Mapping[str, Any]], bool]) -> None:
        _check_signature(function)
        self._fn = function

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return bool(self._fn(trial_id, result))


def _check_signature(function: Callable[..., Any]) -> None:
    name = getattr(function, "__qualname__", None) or type(function).__name__
    if inspect.isclass(function) and issubclass(function, Stopper):
        raise ValueError(f"stop: {name} is a Stopper class; pass an instance of it, {name}(...)")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or extension whose signature cannot be read: trust it
        return
    try:
        signature.bind("trial_id", {})
    except TypeError:
        params = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
        takes = signature.replace(parameters=params, return_annotation=inspect.Signature.empty)
        raise ValueError(
            f"stop: a function stop condition is called as stop(trial_id, result) -> bool, "
            f"but {name} takes {takes}; or pass a dict of thresholds or a tune.Stopper"
        ) from None


class DictStopper(Stopper):
    """Stops a trial once ``result[key] >= threshold`` for any key (Ray Tune's dict ``stop``)."""

    def __init__(self, thresholds: Mapping[str, Any]) -> None:
        for key, value in thresholds.items():
            if not is_number(value, numpy=False):
                raise ValueError(f"stop[{key!r}] must be a number, got {value!r}")
        self.thresholds = dict(thresholds)

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        for key, threshold in self.thresholds.items():
            if key not in result:
                raise ValueError(
                    f"stop: key {key!r} is not in the trial's results (reported keys: {sorted(result)})"
                )
            value = result[key]
            if value is not None and value >= threshold:
                return True
        return False


class MaximumIterationStopper(Stopper):
    """Stops each trial after ``max_iter`` iterations."""

    def __init__(self, max_iter: int) -> None:
        if not isinstance(max_iter, int) or max_iter < 1:
            raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
        self._max_iter = max_iter

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return result.get("training_iteration", 0) >= self._max_iter


class TimeoutStopper(Stopper):
    """Stops the whole experiment after ``timeout`` seconds."""

    def __init__(self, timeout: float) -> None:
        if not is_number(timeout, numpy=False) or timeout <= 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self._timeout = float(timeout)
        self._start: float | None = None

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        if self._start is None:
            self._start = time.monotonic()
        return time.monotonic() - self._start >= self._timeout


class TrialPlateauStopper(Stopper):
    """Stops a trial when the std of its last ``num_results`` values of ``metric`` is <= ``std``."""

    def __init__(self, metric: str, std: float = 0.01, num_results: int = 4, grace_period: int = 4,
                 metric_threshold: float | None = None, mode: str | None = None) -> None:
        if num_results < 1:
            raise ValueError(f"num_results must be >= 1, got {num_results!r}")
        if metric_threshold is not None and mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max' when metric_threshold is set, got {mode!r}")
        self._metric, self._std, self._n, self._grace = metric, std, num_results, grace_period
        self._threshold, self._mode = metric_threshold, mode
        self._history: dict[str, list[float]] = {}
        self._seen: dict[str, int] = {}

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        value = float(result[self._metric])
        self._seen[trial_id] = self._seen.get(trial_id, 0) + 1
        hist = self._history.setdefault(trial_id, [])
        hist.append(value)
        del hist[: -self._n]
        if self._seen[trial_id] < self._grace or len(hist) < self._n:
            return False
        if self._threshold is not None:
            if self._mode == "min" and value > self._threshold:
                return False
            if self._mode == "max" and value < self._threshold:
                return False
        import numpy as np  # here, not at import: a trial's actor imports this module through tune

        return float(np.std(hist)) <= self._std


class CombinedStopper(Stopper):
    """Stops when any of its stoppers would."""

    def __init__(self, *stoppers: Stopper) -> None:
        self._stoppers = stoppers

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return any(s(trial_id, result) for s in self._stoppers)

    def stop_all(self) -> bool:
        return any(s.stop_all() for s in self._stoppers)


def to_stopper(stop: Any) -> Stopper:
    """Turn tune.run's ``stop`` argument (None, dict, callable or Stopper) into a Stopper."""
    if stop is None:
        return NoopStopper()
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return DictStopper(stop)
    if callable(stop):
        return FunctionStopper(stop)
    raise ValueError(
        f"stop must be a dict of thresholds, a callable (trial_id, result) -> bool, or a Stopper; "
        f"got {type(stop).__name__}"
    )
