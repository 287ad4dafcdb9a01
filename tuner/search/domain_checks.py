"""The checks and number formatting behind the search-space domains (``space``).

A domain's bounds are checked as it is made, each error naming the constructor and the argument
(``quniform: q must be > 0, got 0``); quantized values are rounded to the decimals of ``q`` as
written, so ``quniform(0, 1, 0.1)`` gives 0.3, never 0.30000000000000004.
"""

from __future__ import annotations

import math
from decimal import Decimal
import sys
from typing import Any

from schedulers.validation import is_int, is_number


def check_real(fn: str, name: str, x: Any) -> float:
    if not is_number(x, finite=True):
        raise ValueError(f"{fn}: {name} must be a finite number, got {x!r}")
    return float(x)


def check_int(fn: str, name: str, x: Any) -> int:
    if not (is_int(x) or (is_number(x) and float(x).is_integer())):
        raise ValueError(f"{fn}: {name} must be an integer, got {x!r}")
    return int(x)


def check_base(fn: str, base: Any) -> float:
    b = check_real(fn, "base", base)
    if b <= 0 or b == 1:
        raise ValueError(f"{fn}: base must be > 0 and != 1, got {base!r}")
    return b


def py(x: Any) -> Any:
    """numpy scalar -> the Python scalar (so attributes and reprs are plain)."""
    np = sys.modules.get("numpy")  # no numpy imported: no numpy scalar either
    return x.item() if np is not None and isinstance(x, np.generic) else x


def fmt(x: Any) -> str:
    return repr(py(x))


def decimals(q: float) -> int | None:
    """Decimal places of ``q`` as written (0.05 -> 2), or None if it has too many to matter."""
    exponent = Decimal(repr(float(q))).normalize().as_tuple().exponent
    if not isinstance(exponent, int):
        return None
    places = max(0, -exponent)
    return places if places <= 15 else None


def quantize_float(x: float, q: float, lo_k: float, hi_k: float) -> float:
    """Round ``x`` to the nearest multiple of ``q`` with multiplier clipped to [lo_k, hi_k]."""
    k = min(max(round(x / q), lo_k), hi_k)
    value = k * q
    places = decimals(q)
    if places is not None:
        value = round(value, places)  # 3 * 0.1 -> 0.3, not 0.30000000000000004
    return float(value)


def quantized_range(fn: str, lower: Any, upper: Any, q: Any) -> tuple[int, int]:
    """Multipliers k with lower <= k*q <= upper (tolerant to float error at the edges)."""
    lo_k = math.ceil(lower / q - 1e-9)
    hi_k = math.floor(upper / q + 1e-9)
    if lo_k > hi_k:
        raise ValueError(
            f"{fn}: no multiple of q ({fmt(q)}) lies in [{fmt(lower)}, {fmt(upper)}]"
        )
    return lo_k, hi_k
