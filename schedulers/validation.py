"""The value checks shared by the whole project: ints, numbers, seeds and modes.

One rule per question ("is this an int?", "is this a number?", "is this a mode?"), so that a
scheduler, a searcher, ``tune.run``, a YAML spec and a trainer's config accept the same values.
Each caller keeps its own message format where its messages are part of its contract (e.g.
``ASHAScheduler: ...`` or a spec's key path); the predicates here decide what passes.

Why it lives in ``schedulers``: it is the lowest layer. ``tuner`` imports ``schedulers`` and
``algorithms`` imports ``tuner``, while ``schedulers`` imports neither, so a module here can be
used by all three packages without an import cycle. It imports nothing from the project.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["MODES", "check_int", "check_mode", "is_int", "is_mode", "is_number", "is_seed"]

MODES = ("min", "max")


def is_int(value: Any, *, numpy: bool = True) -> bool:
    """Whether ``value`` is an integer and not a bool.

    ``numpy=True``: any ``numbers.Integral`` (numpy's integers too); ``numpy=False``: a Python
    ``int`` only (for values that are stored or serialised as they are).
    """
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral) if numpy else isinstance(value, int)


def is_number(value: Any, *, finite: bool = False, numpy: bool = True) -> bool:
    """Whether ``value`` is a real number and not a bool.

    ``numpy=True``: any ``numbers.Real`` (numpy's scalars too); ``numpy=False``: an ``int`` or
    ``float`` only. ``finite=True``: NaN and +-inf do not count.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real if numpy else (int, float)):
        return False
    return not finite or math.isfinite(value)


def is_seed(value: Any, *, maximum: int | None = None) -> bool:
    """Whether ``value`` is a seed: an integer (numpy's too, not a bool) >= 0 and, when given, <= ``maximum``."""
    return is_int(value) and int(value) >= 0 and (maximum is None or int(value) <= maximum)


def is_mode(mode: Any) -> bool:
    """Whether ``mode`` is 'min' or 'max'."""
    return mode in MODES


def check_mode(mode: Any, field: str = "mode") -> str | None:
    """Return ``mode`` if it is None, 'min' or 'max'; raise a ValueError naming ``field`` otherwise."""
    if mode is not None and not is_mode(mode):
        raise ValueError(f"{field} must be one of {list(MODES)} or None, got {mode!r}")
    return mode


def check_int(
    value: Any, field: str, minimum: int, *, allow_none: bool = False, error: type[Exception] = ValueError
) -> None:
    """Raise ``error`` naming ``field`` unless ``value`` is a Python int >= ``minimum`` (or None,
    when ``allow_none``)."""
    if value is None and allow_none:
        return
    if not is_int(value, numpy=False) or value < minimum:
        raise error(f"{field} must be an int >= {minimum}{' or None' if allow_none else ''}, got {value!r}")
