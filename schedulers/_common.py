"""Helpers shared by the schedulers: argument checks and the metric/mode/time bookkeeping.

Private to the package. Every argument error is one ``ValueError`` whose message starts with the
scheduler's name and names the argument, e.g.
``ASHAScheduler: reduction_factor must be > 1, got 1``.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Mapping, TypeGuard

from schedulers.trial_scheduler import TrialScheduler
from schedulers.validation import is_int, is_mode, is_number


def arg_error(owner: str, field: str, requirement: str, value: Any) -> ValueError:
    return ValueError(f"{owner}: {field} must be {requirement}, got {value!r}")


def check_number(
    owner: str,
    field: str,
    value: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    integer: bool = False,
    allow_inf: bool = False,
) -> Any:
    """Return ``value`` if it is a real number (an integer when asked) within the bounds given."""
    if integer:
        if not is_int(value):
            raise arg_error(owner, field, "an integer", value)
        value = int(value)
    elif not is_number(value) or math.isnan(value):
        raise arg_error(owner, field, "a number", value)
    if math.isinf(value) and not allow_inf:
        raise arg_error(owner, field, "finite", value)
    if gt is not None and not value > gt:
        raise arg_error(owner, field, f"> {gt}", value)
    if ge is not None and not value >= ge:
        raise arg_error(owner, field, f">= {ge}", value)
    if le is not None and not value <= le:
        raise arg_error(owner, field, f"<= {le}", value)
    return value


def check_bool(owner: str, field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise arg_error(owner, field, "True or False", value)
    return value


def check_name(owner: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise arg_error(owner, field, "a non-empty string", value)
    return value


def check_optional_name(owner: str, field: str, value: Any) -> str | None:
    return None if value is None else check_name(owner, field, value)


def check_seed(owner: str, value: Any) -> int | None:
    if value is not None and not is_int(value):
        raise arg_error(owner, "seed", "an integer or None", value)
    return None if value is None else int(value)


def check_mode(owner: str, mode: Any) -> str | None:
    if mode is not None and not is_mode(mode):
        raise arg_error(owner, "mode", "'min' or 'max'", mode)
    return mode


def plain(value: Any) -> Any:
    """A deep copy, so a state dict never aliases a scheduler's live bookkeeping."""
    return copy.deepcopy(value)


def rng_state_to_plain(state: tuple) -> list:
    """``random.Random.getstate()`` as nested lists (plain data that survives JSON too)."""
    version, internal, gauss = state
    return [version, list(internal), gauss]


def rng_state_from_plain(state: Any) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)


class MetricScheduler(TrialScheduler):
    """A scheduler that compares trials by ``metric`` along ``time_attr``.

    Internally every value is a *score*: the metric times +1 for ``mode='max'`` and -1 for
    ``mode='min'``, so higher is always better. Negating every metric and flipping the mode
    therefore gives exactly the same scores, hence the same decisions.
    """

    def __init__(self, time_attr: str, metric: str | None, mode: str | None) -> None:
        owner = type(self).__name__
        super().__init__(
            metric=check_optional_name(owner, "metric", metric), mode=check_mode(owner, mode)
        )
        self._time_attr = check_name(owner, "time_attr", time_attr)

    @property
    def time_attr(self) -> str:
        return self._time_attr

    def stop_means_complete(self, trial: Any, result: Mapping[str, Any]) -> bool:
        """A STOP at or past ``max_t`` (for schedulers that have one) ends the trial's full budget."""
        max_t = getattr(self, "_max_t", None)
        value = result.get(self._time_attr)
        return max_t is not None and isinstance(value, (int, float)) and value >= max_t

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        check_mode(type(self).__name__, mode)
        return super().set_search_properties(metric, mode, **spec)

    def _require_search_properties(self) -> None:
        owner = type(self).__name__
        for field, value in (("metric", self._metric), ("mode", self._mode)):
            if value is None:
                raise ValueError(
                    f"{owner}: {field} is not set; pass {field}= to {owner}(...) or to tune.run(...)"
                )

    @property
    def _sign(self) -> float:
        return 1.0 if self._mode == "max" else -1.0

    def _score(self, result: Mapping[str, Any]) -> float:
        """The result's metric as a score (higher is better); a clear error when it is missing."""
        self._require_search_properties()
        metric = self._metric
        assert metric is not None  # _require_search_properties raised otherwise
        self._require_metric(result, metric)
        value = result[metric]
        if not is_number(value):
            raise ValueError(
                f"{type(self).__name__}: metric {metric!r} must be a number, got {value!r}"
            )
        return self._sign * float(value)

    def _time(self, result: Mapping[str, Any]) -> float:
        if self._time_attr not in result:
            raise ValueError(
                f"{type(self).__name__}: time_attr {self._time_attr!r} is not in the reported result "
                f"(reported keys: {sorted(str(k) for k in result)})"
            )
        value = result[self._time_attr]
        if not is_number(value):
            raise ValueError(
                f"{type(self).__name__}: time_attr {self._time_attr!r} must be a number, got {value!r}"
            )
        return value

    def _has_keys(self, result: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
        return result is not None and self._metric in result and self._time_attr in result
