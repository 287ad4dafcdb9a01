"""The product's one rule for "the best trial": what ``ExperimentAnalysis.get_best_trial``,
``Store.best_trial`` (``tuner ls``) and the store's indexed metric column all follow.

* A trial's score is the number at the flattened key ``metric`` of its result (keys of nested
  dicts joined with ``/``; the last spelling of a key wins, as when flattening); ints and floats
  count, bools and anything else do not.
* In trial order, a score replaces the best so far only if strictly better: ties go to the
  earliest trial. NaN and infinities are left out unless asked to keep them.

    >>> number_at({"info": {"kl": 0.1}, "ok": True}, "info/kl"), number_at({"ok": True}, "ok")
    (0.1, None)
    >>> pick_best([("a", 1.0), ("b", float("nan")), ("c", 1.0)], "max")
    ('a', 1.0, {'b': nan})
"""

from __future__ import annotations

import math
from typing import Any, Hashable, Iterable, Mapping, TypeVar

from schedulers.validation import is_number

K = TypeVar("K", bound=Hashable)


def number_at(result: Any, metric: str) -> float | None:
    """The number at the flattened key ``metric`` of ``result`` (see the module's rule), else None."""
    value = _flat_get(result, metric)
    if not is_number(value, numpy=False):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return None


def pick_best(scored: Iterable[tuple[K, float | None]], mode: str,
              filter_nan_and_inf: bool = True) -> tuple[K | None, float | None, dict[K, float]]:
    """``(key, score, skipped)`` of the best of ``(key, score)`` pairs in order (``mode`` "max" or
    "min"): None scores do not count, and NaN or infinite ones go to ``skipped`` unless
    ``filter_nan_and_inf`` is False. ``(None, None, skipped)`` when nothing counts."""
    best, best_value = None, None
    skipped: dict[K, float] = {}
    for key, value in scored:
        if value is None:
            continue
        if filter_nan_and_inf and not math.isfinite(value):
            skipped[key] = value
            continue
        if best_value is None or (value > best_value if mode == "max" else value < best_value):
            best, best_value = key, value
    return best, best_value, skipped


def _flat_get(result: Any, metric: str) -> Any:
    """``flatten_dict(result).get(metric)``, walking only the branches that can hold ``metric``."""
    if not isinstance(result, Mapping):
        return None
    found: list[Any] = []

    def walk(node: Mapping, prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}/{k}" if prefix else str(k)
            if isinstance(v, Mapping) and v:
                if metric.startswith(key + "/"):
                    walk(v, key)
            elif key == metric:
                found.append(v)

    walk(result, "")
    return found[-1] if found else None
