"""Values as a person reads them: long strings and big containers shortened, with a marker that
says how long they were, so that a 10 MB string in a config is one short line of a table or a
summary. Only what is printed is shortened: the store, exports and the Python API keep values whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["WIDTH", "ITEMS", "short_text", "short_value", "short_repr"]

#: The longest string printed whole (shortened ones are this long, marker included).
WIDTH = 80
#: The most items of a list, tuple, set or dict printed; the rest are counted in a marker.
ITEMS = 20


def short_text(text: str, width: int = WIDTH) -> str:
    """``text`` whole when it has at most ``width`` characters, else its head and tail around a
    marker that says how long it was, e.g. ``'aaaaaaaa...<10,485,760 chars>...aaaaaaa'``: at most
    ``width`` characters, but never less than the marker and two characters of each end."""
    n = len(text)
    if n <= width:
        return text
    marker = f"...<{n:,} chars>..."
    keep = max(width - len(marker), 4)
    head = (keep + 1) // 2
    return text[:head] + marker + text[n - (keep - head):]


def short_value(value: Any, width: int = WIDTH, items: int = ITEMS) -> Any:
    """A copy of ``value`` for printing: strings (and bytes) longer than ``width`` shortened by
    :func:`short_text`, lists, tuples and sets cut to ``items`` items plus a marker string, dicts
    to ``items`` keys plus a ``'...'`` key; other values as they are."""
    return _short(value, width, items, 0)


def _short(value: Any, width: int, items: int, depth: int) -> Any:
    if isinstance(value, str):
        return short_text(value, width)
    if isinstance(value, (bytes, bytearray)):
        return value if len(value) <= width else short_text(repr(bytes(value)), width)
    if depth > 16:  # a deeply nested (or cyclic) value: its type is enough
        return f"<{type(value).__name__}>"
    if isinstance(value, Mapping):
        pairs = list(value.items())
        out = {k if not isinstance(k, str) else short_text(k, width): _short(v, width, items, depth + 1)
               for k, v in pairs[:items]}
        if len(pairs) > items:
            out["..."] = f"<{len(pairs) - items:,} more keys>"
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = list(value)
        shown = [_short(v, width, items, depth + 1) for v in seq[:items]]
        if len(seq) > items:
            shown.append(f"...<{len(seq) - items:,} more items>")
        return tuple(shown) if type(value) is tuple else shown
    return value


def short_repr(value: Any, width: int = WIDTH, items: int = ITEMS) -> str:
    """``repr`` of :func:`short_value` of ``value``, itself at most a few ``width`` long per item
    (an object whose own ``repr`` is long is shortened too)."""
    text = repr(short_value(value, width, items))
    return short_text(text, max(width, (width + 4) * (items + 1)))
