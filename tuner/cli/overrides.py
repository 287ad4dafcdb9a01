"""``--set key.path=value`` overrides, applied to a spec's YAML document before it is validated."""

from __future__ import annotations

import re
from typing import Any, Sequence

from tuner.cli.errors import CLIError
from tuner.cli.yaml_io import parse_scalar

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z_0-9][A-Za-z0-9_\-]*)*$")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"scheduler.max_t=20"`` -> (["scheduler", "max_t"], 20)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise CLIError(f"argument --set: expected KEY=VALUE with a dotted KEY (e.g. --set num_samples=2 "
                       f"or --set config.lr=0.001), got {text!r}")
    return key.split("."), parse_scalar(value, f"argument --set {key}")


def apply_overrides(document: Any, overrides: Sequence[str]) -> Any:
    """``document`` with every override set (intermediate mappings are created as needed)."""
    if not overrides:
        return document
    if document is None:
        document = {}
    if not isinstance(document, dict):
        return document  # the spec's own validation says what is wrong with it
    for text in overrides:
        keys, value = parse_override(text)
        node = document
        for depth, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None or (isinstance(child, str) and key in ("scheduler", "search")):
                # "scheduler: asha" then --set scheduler.max_t=9: the shorthand becomes a mapping
                child = {"type": child} if isinstance(child, str) else {}
                node[key] = child
            if not isinstance(child, dict):
                where = ".".join(keys[: depth + 1])
                raise CLIError(f"argument --set {'.'.join(keys)}: spec key '{where}' is not a mapping "
                               f"(it holds {child!r}), so it has no key '{keys[depth + 1]}'")
            node = child
        node[keys[-1]] = value
    return document
