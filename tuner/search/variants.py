"""Expansion of a search space (a config with nested dicts) into concrete configs.

A config is a tree of dicts, lists and tuples. Its leaves are constants, :class:`Domain` objects
(sampled) and grid axes ``{"grid_search": [...]}`` (enumerated). A path is the tuple of keys (and
list indices) from the root to a node, e.g. ``("model", "lr")``.

Grid order follows Ray Tune: axes sorted by path, the FIRST axis varies fastest::

    >>> from tuner.search.space import grid_search, sample_from
    >>> space = {"a": grid_search([1, 2]), "b": grid_search(["x", "y"])}
    >>> [tuple(v.values()) for v in grid_variants(space)]
    [(1, 'x'), (2, 'x'), (1, 'y'), (2, 'y')]
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tuner.flatten import flatten_dict, unflatten_dict  # public here since the start

from .space import (
    Domain,
    Function,
    SampleSpec,
    UnresolvedDependency,
    _ConfigView,
    is_grid_search,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Path",
    "path_str",
    "iter_domains",
    "grid_axes",
    "count_grid_points",
    "grid_variants",
    "grid_assignment_at",
    "resolve_config",
    "sample_domain",
    "flatten_dict",
    "unflatten_dict",
]

Path = tuple[Any, ...]


def path_str(path: Path, sep: str = "/") -> str:
    """``("model", "lr")`` -> ``"model/lr"``."""
    return sep.join(str(k) for k in path)


def _grid_values(node: dict, path: Path) -> list:
    values = node["grid_search"]
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (list, tuple)):
        raise ValueError(
            f"grid_search at {path_str(path)!r}: values must be a non-empty list, got {values!r}"
        )
    if not values:
        raise ValueError(
            f"grid_search at {path_str(path)!r}: values must be a non-empty list, got []"
        )
    return list(values)


def _walk(node: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    if isinstance(node, Domain):
        yield path, node
    elif is_grid_search(node):
        yield path, _grid_values(node, path)
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, path + (k,))
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))


def _check_config(config: Any, fn: str) -> None:
    if not isinstance(config, dict):
        raise ValueError(f"{fn}: config must be a dict, got {type(config).__name__}")


def iter_domains(config: dict) -> list[tuple[Path, Domain | list]]:
    """Every searchable leaf of ``config``: ``(path, Domain)`` or ``(path, grid values)``.

    In traversal (insertion) order; grid values are not looked into.

    >>> from tuner.search.space import grid_search
    >>> iter_domains({"opt": {"lr": grid_search([0.1, 0.01])}, "seed": 0})
    [(('opt', 'lr'), [0.1, 0.01])]
    """
    _check_config(config, "iter_domains")
    return list(_walk(config, ()))


def _sort_key(path: Path) -> tuple:
    return tuple((0, k, "") if isinstance(k, (int, float)) else (1, 0, str(k)) for k in path)


def grid_axes(config: dict) -> list[tuple[Path, list]]:
    """The grid axes of ``config`` as ``(path, values)``, sorted by path (Ray Tune's order)."""
    axes = [(p, v) for p, v in iter_domains(config) if isinstance(v, list)]
    return sorted(axes, key=lambda axis: _sort_key(axis[0]))


def count_grid_points(config: dict) -> int:
    """Number of grid combinations (1 when there is no grid axis)."""
    n = 1
    for _, values in grid_axes(config):
        n *= len(values)
    return n


def grid_assignment_at(axes: list[tuple[Path, list]], index: int) -> dict[Path, Any]:
    """The ``index``-th combination of ``axes`` (from :func:`grid_axes`); first axis fastest."""
    assignment: dict[Path, Any] = {}
    for path, values in axes:
        index, digit = divmod(index, len(values))
        assignment[path] = values[digit]
    return assignment


def grid_variants(config: dict) -> list[dict[Path, Any]]:
    """Every grid combination of ``config`` as ``{path: value}``, in Ray Tune's order.

    A config without grid axes has exactly one (empty) variant.
    """
    axes = grid_axes(config)
    return [grid_assignment_at(axes, i) for i in range(count_grid_points(config))]


# --------------------------------------------------------------------------- resolution


def _copy_tree(node: Any) -> Any:
    """Deep copy of containers and constants; Domains are kept as they are (they get replaced)."""
    if isinstance(node, Domain):
        return node
    if isinstance(node, dict):
        return {k: _copy_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy_tree(v) for v in node]
    if isinstance(node, tuple):
        return tuple(_copy_tree(v) for v in node)
    try:
        return copy.deepcopy(node)
    except Exception:  # noqa: BLE001 - an uncopyable constant (a lock, a module...): share it, as Ray would fail
        return node


def _assign(node: Any, path: Path, value: Any, full: Path) -> Any:
    """Set ``path`` under ``node`` to ``value``; return the (possibly rebuilt) node."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(node, dict) and not is_grid_search(node):
        node[key] = _assign(node.get(key, {}), rest, value, full)
        return node
    if isinstance(node, (list, tuple)) and isinstance(key, int) and -len(node) <= key < len(node):
        items = list(node)
        items[key] = _assign(items[key], rest, value, full)
        return items if isinstance(node, list) else tuple(items)
    raise ValueError(
        f"resolve_config: grid_assignment path {path_str(full)!r} does not fit the config"
    )


def _get(node: Any, path: Path) -> Any:
    for key in path:
        node = node[key]
    return node


def _sample_tree(node: Any, path: Path, rng: np.random.Generator, functions: list[Path]) -> Any:
    """Sample every non-Function Domain under ``node``; collect Function paths."""
    if isinstance(node, Function):
        functions.append(path)
        return node
    if isinstance(node, Domain):
        value = node.sample(rng)
        # A sampled value may itself hold domains (a conditional space such as
        # choice([{"opt": "sgd", "lr": uniform(...)}, ...])): resolve it too, on a copy.
        return _sample_tree(_copy_tree(value), path, rng, functions)
    if is_grid_search(node):
        raise ValueError(
            f"resolve_config: grid_search at {path_str(path)!r} has no value in grid_assignment"
        )
    if isinstance(node, dict):
        for k, v in node.items():
            node[k] = _sample_tree(v, path + (k,), rng, functions)
        return node
    if isinstance(node, list):
        return [_sample_tree(v, path + (i,), rng, functions) for i, v in enumerate(node)]
    if isinstance(node, tuple):
        return tuple(_sample_tree(v, path + (i,), rng, functions) for i, v in enumerate(node))
    return node


def _resolve_functions(out: dict, functions: list[Path], rng: np.random.Generator) -> dict:
    """Evaluate ``sample_from`` leaves, retrying those that read a not-yet-resolved key."""
    spec = SampleSpec(_ConfigView(out), rng)
    pending = list(functions)
    while pending:
        waiting = []
        for path in pending:
            domain = _get(out, path)
            try:
                value = domain.sample(rng, spec)
            except UnresolvedDependency:
                waiting.append(path)
                continue
            except Exception as exc:
                exc.add_note(f"while evaluating sample_from at {path_str(path)!r}")
                raise
            out = _assign(out, path, value, path)
        if len(waiting) == len(pending):
            names = ", ".join(repr(path_str(p)) for p in waiting)
            raise ValueError(
                f"sample_from: cannot resolve {names}: each reads a key that is never resolved "
                "(circular dependency between sample_from functions?)"
            )
        pending = waiting
    return out


def resolve_config(
    config: dict,
    grid_assignment: Mapping[Path, Any] | None = None,
    rng: np.random.Generator | None = None,
) -> dict:
    """One concrete config: a deep copy of ``config`` with every search leaf replaced.

    ``grid_assignment`` maps paths to fixed values (one grid combination, or any preset values;
    missing intermediate dicts are created). Every grid axis must be covered by it. Then every
    Domain is sampled with ``rng`` in traversal order, and ``sample_from`` functions run last,
    so they can read any other resolved value through ``spec.config``.

    >>> from tuner.search.space import grid_search, sample_from
    >>> resolve_config({"a": grid_search([1, 2]), "b": sample_from(lambda s: s.config.a * 10)},
    ...                {("a",): 2})
    {'a': 2, 'b': 20}
    """
    _check_config(config, "resolve_config")
    if rng is None:
        import numpy as np

        rng = np.random.default_rng()
    out: dict = _copy_tree(config)
    for path, value in (grid_assignment or {}).items():
        path = tuple(path) if isinstance(path, (tuple, list)) else (path,)
        if not path:
            raise ValueError("resolve_config: grid_assignment paths must not be empty")
        out = _assign(out, path, _copy_tree(value), path)
    functions: list[Path] = []
    out = _sample_tree(out, (), rng, functions)
    return _resolve_functions(out, functions, rng)


def sample_domain(domain: Domain, rng: np.random.Generator) -> Any:
    """Sample a non-``sample_from`` domain, resolving domains nested in the drawn value."""
    if isinstance(domain, Function):
        raise ValueError("sample_domain: domain must not be a sample_from function")
    functions: list[Path] = []
    value = _sample_tree(domain, (), rng, functions)
    if functions:
        raise ValueError("sample_domain: a drawn value holds sample_from functions")
    return value
