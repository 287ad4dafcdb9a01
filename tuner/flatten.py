"""Flat keys (Ray Tune's ``"a/b"`` for ``{"a": {"b": ...}}``): one module, used by the controller,
the TensorBoard export, the analysis and the CLI alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["flat_result", "flatten_dict", "unflatten_dict"]

_Result = TypeVar("_Result", bound=Mapping[str, Any])


def flat_result(result: _Result) -> _Result | dict[str, Any]:
    """``result`` with nested keys flattened by :func:`flatten_dict`; ``result`` itself (no copy)
    when no value is nested, which is the common case a sweep meets once per result."""
    return flatten_dict(result) if any(isinstance(v, Mapping) for v in result.values()) else result


def flatten_dict(d: Mapping, sep: str = "/", prevent_delimiter: bool = False) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}`` (Ray Tune's flattened keys). Lists are leaves;
    an empty nested dict stays as a ``{}`` leaf so :func:`unflatten_dict` restores it.

    >>> flatten_dict({"a": {"b": 1, "c": {}}, "d": [1]})
    {'a/b': 1, 'a/c': {}, 'd': [1]}
    """
    out: dict[str, Any] = {}

    def walk(node: Mapping, prefix: str) -> None:
        for k, v in node.items():
            key = str(k)
            if prevent_delimiter and sep in key:
                raise ValueError(f"flatten_dict: key {key!r} contains the delimiter {sep!r}")
            full = f"{prefix}{sep}{key}" if prefix else key
            if isinstance(v, Mapping) and v:
                walk(v, full)
            else:
                out[full] = v

    walk(d, "")
    return out


def unflatten_dict(d: Mapping[str, Any], sep: str = "/") -> dict[str, Any]:
    """Inverse of :func:`flatten_dict`: ``{"a/b": 1}`` -> ``{"a": {"b": 1}}``.

    >>> unflatten_dict({"a/b": 1, "a/c": 2, "d": 3})
    {'a': {'b': 1, 'c': 2}, 'd': 3}
    """
    out: dict[str, Any] = {}
    for key, value in d.items():
        parts = str(key).split(sep)
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(
                    f"unflatten_dict: key {key!r} needs {sep.join(parts[: i + 1])!r} to be a dict, "
                    f"but it is {child!r}"
                )
            node = child
        leaf = parts[-1]
        if leaf in node and isinstance(node[leaf], dict) and node[leaf]:
            raise ValueError(f"unflatten_dict: key {key!r} collides with nested keys under it")
        node[leaf] = value
    return out
