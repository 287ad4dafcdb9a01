"""JSON encoding of results and configs for the store.

``encode`` never fails: numpy/torch scalars and arrays become Python numbers and lists, NaN and
infinities are written the way Python's ``json`` writes them (``NaN``, ``Infinity``), dates become ISO
strings, and anything else becomes its ``repr()``. ``decode`` returns plain Python objects.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import json
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

__all__ = ["encode", "decode", "round_trips"]

_MAX_DEPTH = 64


def _safe_repr(o: Any) -> str:
    try:
        return repr(o)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not lose the whole row
        return f"<unrepresentable {type(o).__module__}.{type(o).__qualname__}>"


def _default(o: Any) -> Any:
    """``json`` hook for objects it does not know natively."""
    # numpy scalars and arrays, torch tensors, jax arrays, ... (all expose tolist()).
    tolist = getattr(o, "tolist", None)
    if tolist is not None and callable(tolist) and not isinstance(o, type):
        try:
            return tolist()
        except Exception:  # noqa: BLE001 - a user object's tolist() may fail any way: fall back to the next rule
            pass
    if isinstance(o, (_dt.datetime, _dt.date, _dt.time)):
        return o.isoformat()
    if isinstance(o, _dt.timedelta):
        return o.total_seconds()
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, (set, frozenset)):
        try:
            return sorted(o)
        except TypeError:
            return list(o)
    if isinstance(o, Mapping):
        return dict(o)
    if isinstance(o, PurePath):
        return str(o)
    if isinstance(o, (bytes, bytearray, memoryview)):
        return _safe_repr(bytes(o))
    item = getattr(o, "item", None)  # 0-d array-likes without tolist
    if item is not None and callable(item):
        try:
            v = item()
            if isinstance(v, (int, float, bool, str)):
                return v
        except Exception:  # noqa: BLE001 - a user object's item() may fail any way: fall back to the next rule
            pass
    if isinstance(o, decimal.Decimal):
        return float(o)
    return _safe_repr(o)


_encoder = json.JSONEncoder(
    default=_default, separators=(",", ":"), ensure_ascii=False, allow_nan=True
)
_encode = _encoder.encode
_decode = json.JSONDecoder().decode


def _c_encode() -> Any:
    """The same encoder as ``_encoder``, built once instead of at every call (``JSONEncoder.encode``
    builds its C encoder each time): about 10% less per result row. Without a circular-reference
    check, so that it keeps no state and any thread can use it; a cyclic object makes it raise
    RecursionError, and :func:`encode` falls back to :func:`_sanitize`. None where the C encoder
    is missing or differs."""
    try:
        from json.encoder import encode_basestring

        c_make_encoder = getattr(json.encoder, "c_make_encoder", None)  # private: typeshed does not list it
        if c_make_encoder is None:
            return None
        make = c_make_encoder(None, _default, encode_basestring, None, ":", ",", False, False, True)
        join = "".join

        def fast(obj: Any) -> str:
            return join(make(obj, 0))

        probe = {"a": [1, 2.5, float("nan"), float("-inf"), None, True], "b": {"c": "\u00e9\n"}, 3: _dt.date(2024, 1, 2)}
        return fast if fast(probe) == _encode(probe) else None
    except Exception:  # noqa: BLE001 - pragma: no cover - another Python
        return None


_fast_encode = _c_encode() or _encode


def _key(k: Any) -> Any:
    if k is None or isinstance(k, (str, int, float, bool)):
        return k
    conv = _default(k)
    if conv is None or isinstance(conv, (str, int, float, bool)):
        return conv
    return _safe_repr(k)


def _sanitize(o: Any, depth: int, seen: set[int]) -> Any:
    """Slow path: turn ``o`` into something ``json`` surely accepts (odd keys, cycles, ...)."""
    if o is None or isinstance(o, (str, bool, int)):
        return o
    if isinstance(o, float):
        return o
    if depth > _MAX_DEPTH:
        return _safe_repr(o)
    if isinstance(o, (dict, list, tuple)) or isinstance(o, Mapping):
        oid = id(o)
        if oid in seen:
            return "<circular reference>"
        seen.add(oid)
        try:
            if isinstance(o, Mapping):
                return {_key(k): _sanitize(v, depth + 1, seen) for k, v in list(o.items())}
            return [_sanitize(v, depth + 1, seen) for v in list(o)]
        finally:
            seen.discard(oid)
    conv = _default(o)
    if conv is o or isinstance(conv, str):
        return conv if isinstance(conv, str) else _safe_repr(o)
    return _sanitize(conv, depth + 1, seen)


def encode(obj: Any) -> str:
    """Encode ``obj`` as compact JSON text. Never raises."""
    try:
        return _fast_encode(obj)
    except Exception:  # noqa: BLE001 - the fast path gives up on anything unusual: the slow one decides
        pass
    try:
        return _encode(_sanitize(obj, 0, set()))
    except Exception:  # noqa: BLE001 - encode never raises: a row is stored as its repr rather than lost
        return _encode(_safe_repr(obj))


def decode(text: str | bytes | None) -> Any:
    """Decode JSON text written by :func:`encode` (``None`` stays ``None``)."""
    if text is None:
        return None
    return _decode(text if isinstance(text, str) else bytes(text).decode("utf-8"))



def round_trips(obj: Any) -> bool:
    """Whether ``decode(encode(obj))`` gives ``obj`` back exactly: plain dicts with string keys,
    lists, strings, numbers, booleans and None, each of the very same type. Never raises."""
    try:
        return _same(decode(encode(obj)), obj, 0)
    except Exception:  # noqa: BLE001 - a value that cannot even be compared is no plain data
        return False


def _same(decoded: Any, obj: Any, depth: int) -> bool:
    if type(decoded) is not type(obj) or depth > _MAX_DEPTH:
        return False
    if isinstance(obj, dict):
        return list(decoded) == list(obj) and all(_same(decoded[k], obj[k], depth + 1) for k in obj)
    if isinstance(obj, list):
        return len(decoded) == len(obj) and all(_same(d, o, depth + 1) for d, o in zip(decoded, obj))
    if isinstance(obj, float) and obj != obj:  # NaN
        return decoded != decoded
    return bool(decoded == obj)
