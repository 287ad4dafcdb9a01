"""YAML for specs: a safe loader (no tags that build objects) that also reads ``1e-4`` as a float
and refuses duplicate keys."""

from __future__ import annotations

import os
import re
from pathlib import Path
from collections.abc import Hashable
from typing import Any

import yaml

from tuner.cli.errors import CLIError, SpecError

# YAML 1.1 (PyYAML) reads 1e-4 as a string: it wants a dot (1.0e-4). Specs are full of 1e-4.
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with scientific floats and an error on a key given twice."""


def _construct_mapping(loader: SpecLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            continue  # SafeLoader reports an unhashable key itself
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


SpecLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
SpecLoader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _first in list("-+0123456789."):
    SpecLoader.yaml_implicit_resolvers[_first] = [
        (tag, rx) for tag, rx in SpecLoader.yaml_implicit_resolvers.get(_first, [])
        if tag != "tag:yaml.org,2002:float"
    ]
SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def load_spec_file(path: str | os.PathLike[str]) -> Any:
    """The YAML document of a spec file; a missing file or bad YAML is a CLIError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CLIError(f"spec file '{path}' not found") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise CLIError(f"spec file '{path}' cannot be read: {exc}") from None
    try:
        return yaml.load(text, Loader=SpecLoader)  # noqa: S506 - SpecLoader is a SafeLoader
    except yaml.YAMLError as exc:
        raise SpecError("", f"'{path}' is not valid YAML: {_yaml_problem(exc)}") from None


def parse_scalar(text: str, where: str) -> Any:
    """A ``--set`` value as YAML reads it (``2`` is an int, ``1e-4`` a float, ``[a, b]`` a list)."""
    try:
        return yaml.load(text, Loader=SpecLoader)  # noqa: S506 - SpecLoader is a SafeLoader
    except yaml.YAMLError as exc:
        raise CLIError(f"{where}: the value is not valid YAML: {_yaml_problem(exc)}") from None


def dump(document: Any, *, block: bool = False) -> str:
    """``document`` as YAML, keys in the order given (``block``: no inline mappings or lists)."""
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False if block else None)
