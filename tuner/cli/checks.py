"""Type checks for spec values; each failure names the key path and what was expected."""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Literal, Mapping, overload

from schedulers import validation
from tuner.cli.errors import SpecError


def describe(value: Any) -> str:
    """``value`` as an error message shows it: its repr (shortened) and YAML type."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    kind = {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)
    return f"{text} ({kind})"


def join(path: str, key: Any) -> str:
    """The key path of ``key`` inside ``path`` ('a.b', 'a[0]')."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool (what a spec's YAML can hold)."""
    return validation.is_number(value, finite=True, numpy=False)


def is_int(value: Any) -> bool:
    """An int, not a bool."""
    return validation.is_int(value, numpy=False)


def expect_mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected a mapping (key: value lines), got {describe(value)}")
    for key in value:
        if not isinstance(key, str):
            raise SpecError(join(path, key), f"keys must be strings, got {describe(key)}")
    return dict(value)


def expect_list(value: Any, path: str, *, min_len: int = 0) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(path, f"expected a list, got {describe(value)}")
    if len(value) < min_len:
        raise SpecError(path, f"expected a list of at least {min_len} item(s), got {value!r}")
    return value


@overload
def expect_str(value: Any, path: str, *, allow_none: Literal[False] = False) -> str: ...


@overload
def expect_str(value: Any, path: str, *, allow_none: bool) -> str | None: ...


def expect_str(value: Any, path: str, *, allow_none: bool = False) -> str | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value:
        raise SpecError(path, f"expected a non-empty string{' or null' if allow_none else ''}, got {describe(value)}")
    return value


def expect_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(path, f"expected true or false, got {describe(value)}")
    return value


def expect_int(value: Any, path: str, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    bound = f" >= {minimum}" if minimum is not None else ""
    if not is_int(value) or (minimum is not None and value < minimum):
        raise SpecError(path, f"expected an integer{bound}{' or null' if allow_none else ''}, got {describe(value)}")
    return value


def expect_number(value: Any, path: str, *, positive: bool = False, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if not is_number(value) or (positive and value <= 0):
        what = "a number > 0" if positive else "a number"
        raise SpecError(path, f"expected {what}{' or null' if allow_none else ''}, got {describe(value)}")
    return value


def expect_choice(value: Any, path: str, allowed: Iterable[str], what: str) -> str:
    allowed = list(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise SpecError(path, f"unknown {what} {value!r} (expected one of: {', '.join(allowed)})")
    return value


def suggest(key: str, allowed: Iterable[str]) -> str | None:
    """The allowed key ``key`` was probably meant to be: one it starts, else the closest spelling."""
    allowed = list(allowed)
    containing = [a for a in allowed if len(key) >= 3 and (a.startswith(key) or key in a)]
    if containing:
        return containing[0]
    close = difflib.get_close_matches(key, allowed, n=1)
    return close[0] if close else None


def check_keys(node: Mapping[str, Any], path: str, allowed: Iterable[str], required: Iterable[str] = ()) -> None:
    """Unknown keys (with a close match suggested) and missing required keys are errors."""
    allowed = list(allowed)
    for key in node:
        if key not in allowed:
            close = suggest(key, allowed)
            hint = f"; did you mean '{close}'?" if close else ""
            raise SpecError(join(path, key), f"unknown key{hint} (allowed keys: {', '.join(allowed)})")
    for key in required:
        if key not in node or node[key] is None:
            raise SpecError(join(path, key), "missing (this key is required)")
