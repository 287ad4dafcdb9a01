"""Our search space as Optuna distributions, and values between the two.

``convert_space`` turns a space of our domains (``uniform``, ``choice``, ... in nested dicts, with
constants) into one :class:`OptunaParam` per searchable leaf, named by its flattened key
(``"model/lr"``); a param decodes the value Optuna samples into the config's value and encodes a
user-given value (``points_to_evaluate``, ``add_evaluated_point``) into Optuna's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from schedulers.validation import is_number

from .domain_checks import quantize_float, quantized_range
from .space import (
    Categorical,
    Domain,
    Float,
    Function,
    Integer,
    Normal,
    is_grid_search,
)
from .variants import Path, path_str

__all__ = [
    "OptunaParam",
    "contains_search_leaf",
    "convert_space",
    "encode_point",
    "expand_flat_keys",
    "values_equal",
]

# The searcher's logger: users silence or filter OptunaSearch's warnings by that one name.
logger = logging.getLogger("tuner.search.optuna_search")


class OptunaParam:
    """One Optuna parameter: its flattened name, path in the config, distribution and codec."""

    def __init__(
        self, name: str, path: Path, dist: BaseDistribution, domain: Domain | None = None,
        index_choices: list | None = None, quantize: Callable[[Any], Any] | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.dist = dist
        self.domain = domain
        self.index_choices = index_choices  # categories Optuna sees as indices 0..n-1
        self._quantize = quantize

    def decode(self, value: Any) -> Any:
        """Optuna's value -> the config's value."""
        if self.index_choices is not None:
            return self.index_choices[int(value)]
        if isinstance(self.domain, Integer):
            value = int(value)
        elif isinstance(self.domain, Float):
            value = float(value)
            if self.domain.q is None and value == self.domain.upper:
                value = math.nextafter(value, -math.inf)  # our uniform excludes upper
        if self._quantize is not None:
            value = self._quantize(value)
        return value

    def encode(self, value: Any, where: str) -> Any:
        """A user-given value (points_to_evaluate) -> Optuna's value; checked against the domain."""
        if self.index_choices is not None:
            index = _index_of(self.index_choices, value)
            if index is None:
                raise ValueError(
                    f"{where}: value {value!r} of {self.name!r} is not one of the choices "
                    f"{self.index_choices!r}"
                )
            return index
        if isinstance(self.dist, CategoricalDistribution):
            if _index_of(list(self.dist.choices), value) is None:
                raise ValueError(
                    f"{where}: value {value!r} of {self.name!r} is not one of the choices "
                    f"{list(self.dist.choices)!r}"
                )
            return value
        if not is_number(value):
            raise ValueError(f"{where}: value of {self.name!r} must be a number, got {value!r}")
        value = value.item() if isinstance(value, np.generic) else value
        valid = self.domain.is_valid(value) if self.domain is not None else \
            self.dist._contains(self.dist.to_internal_repr(value))
        if not valid:
            logger.warning("%s: value %r of %r is outside %r", where, value, self.name,
                           self.domain if self.domain is not None else self.dist)
        return value


def _index_of(choices: list, value: Any) -> int | None:
    """Index of ``value`` in ``choices``: identity first, then same type and equal, then equal."""
    for i, c in enumerate(choices):
        if c is value:
            return i
    for same_type in (True, False):
        for i, c in enumerate(choices):
            if same_type and type(c) is not type(value):
                continue
            try:
                if bool(c == value):
                    return i
            except Exception:  # noqa: BLE001 - e.g. numpy arrays: ambiguous truth value
                continue
    return None


def _primitive_choices(categories: list) -> bool:
    """Whether Optuna can hold ``categories`` as they are (unique None/bool/int/float/str)."""
    for c in categories:
        if c is not None and type(c) not in (bool, int, float, str):
            return False
        if isinstance(c, float) and math.isnan(c):
            return False
    for i, c in enumerate(categories):  # 1, 1.0 and True are one choice to Optuna
        if any(c == categories[j] for j in range(i)):
            return False
    return True


def contains_search_leaf(node: Any) -> bool:
    if isinstance(node, (Domain, BaseDistribution)) or is_grid_search(node):
        return True
    if isinstance(node, Mapping):
        return any(contains_search_leaf(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(contains_search_leaf(v) for v in node)
    return False


def _leaves(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every leaf of a space: Domains, Optuna distributions, grid axes and constants."""
    if isinstance(node, (Domain, BaseDistribution)) or is_grid_search(node):
        yield path, node
    elif isinstance(node, Mapping) and node:
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, (list, tuple)) and node:
        for i, v in enumerate(node):
            yield from _leaves(v, path + (i,))
    else:
        yield path, node


def _translate(name: str, path: Path, domain: Any) -> OptunaParam:
    """One of our domains (or an Optuna distribution) -> an :class:`OptunaParam`."""
    if isinstance(domain, BaseDistribution):
        return OptunaParam(name, path, domain)
    if is_grid_search(domain):
        raise ValueError(
            f"OptunaSearch: grid_search at {name!r} is not supported: grid search is only for "
            "BasicVariantGenerator (use choice(...) to let Optuna pick among the values)"
        )
    if isinstance(domain, Function):
        raise ValueError(
            f"OptunaSearch: sample_from at {name!r} is not supported (Optuna cannot model an "
            "arbitrary function); give OptunaSearch a define-by-run function as `space` instead"
        )
    if isinstance(domain, Normal):
        raise ValueError(
            f"OptunaSearch: {domain!r} at {name!r} is not supported: Optuna has no normal "
            "distribution; use uniform/loguniform bounds instead"
        )
    if isinstance(domain, Float):
        lower, upper, q = float(domain.lower), float(domain.upper), domain.q
        if q is None:
            return OptunaParam(name, path, FloatDistribution(lower, upper, log=domain.log), domain)
        step = float(q)
        lo_k, hi_k = quantized_range(domain.function_name, domain.lower, domain.upper, step)

        def quantize(x: float) -> float:
            return quantize_float(x, step, lo_k, hi_k)

        if domain.log:  # Optuna has no step with log=True: sample log-uniformly, then round
            return OptunaParam(name, path, FloatDistribution(lower, upper, log=True), domain,
                               quantize=quantize)
        low, high = quantize(lo_k * step), quantize(hi_k * step)
        return OptunaParam(name, path, FloatDistribution(low, high, step=step), domain,
                           quantize=quantize)
    if isinstance(domain, Integer):
        low, high, q = domain.low, domain.high, domain.q
        if q is not None and q > 1 and domain.log:  # Optuna has no step with log=True

            def quantize_int(x: int) -> int:
                return int(min(max(round(x / q) * q, low), high))

            return OptunaParam(name, path, IntDistribution(low, high, log=True), domain,
                               quantize=quantize_int)
        return OptunaParam(name, path, IntDistribution(low, high, log=domain.log, step=q or 1),
                           domain)
    if isinstance(domain, Categorical):
        categories = list(domain.categories)
        if any(contains_search_leaf(c) for c in categories):
            raise ValueError(
                f"OptunaSearch: choice at {name!r} has search-space domains inside its "
                "categories (a conditional space); OptunaSearch supports that only through a "
                "define-by-run function as `space`"
            )
        if _primitive_choices(categories):
            return OptunaParam(name, path, CategoricalDistribution(categories), domain)
        return OptunaParam(name, path, CategoricalDistribution(list(range(len(categories)))),
                           domain, index_choices=categories)
    raise ValueError(f"OptunaSearch: {name!r} has an unsupported domain {domain!r}")


def expand_flat_keys(node: Any, path: Path = ()) -> Any:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}`` at any depth (Ray's flattened keys); search leaves
    and non-dict values are kept as they are."""
    if not isinstance(node, dict) or is_grid_search(node):
        return node
    out: dict = {}
    for key, value in node.items():
        parts = key.split("/") if isinstance(key, str) and "/" in key else [key]
        if any(p == "" for p in parts):
            parts = [key]
        target = out
        for depth, part in enumerate(parts[:-1]):
            child = target.setdefault(part, {})
            if not isinstance(child, dict) or is_grid_search(child):
                raise ValueError(f"OptunaSearch: key {path_str(path + (key,))!r} collides with "
                                 f"{path_str(path + tuple(parts[:depth + 1]))!r}")
            target = child
        leaf = parts[-1]
        value = expand_flat_keys(value, path + tuple(parts))
        if leaf in target:
            if isinstance(target[leaf], dict) and isinstance(value, dict) \
                    and not is_grid_search(value) and not is_grid_search(target[leaf]):
                for k, v in value.items():
                    if k in target[leaf]:
                        raise ValueError("OptunaSearch: two keys of the search space name "
                                         f"{path_str(path + tuple(parts) + (k,))!r}")
                    target[leaf][k] = v
                continue
            raise ValueError(
                f"OptunaSearch: two keys of the search space name {path_str(path + tuple(parts))!r}"
            )
        target[leaf] = value
    return out


def convert_space(space: dict) -> tuple[list[OptunaParam], dict[str, Any]]:
    """``(params, constants)`` of a (possibly nested) space; constants keyed by flat name.

    ``space`` must have gone through :func:`expand_flat_keys`.
    """
    if not isinstance(space, dict):
        raise ValueError(f"space must be a dict, got {type(space).__name__}")
    params: list[OptunaParam] = []
    constants: dict[str, Any] = {}
    seen: set[str] = set()
    for path, leaf in _leaves(space):
        if not path:
            continue  # an empty space
        name = path_str(path)
        if name in seen:
            raise ValueError(
                f"OptunaSearch: two keys of the search space flatten to the same name {name!r}"
            )
        seen.add(name)
        if isinstance(leaf, (Domain, BaseDistribution)) or is_grid_search(leaf):
            params.append(_translate(name, path, leaf))
        else:
            constants[name] = leaf
    return params, constants


def values_equal(a: Any, b: Any) -> bool:
    """``a == b``, False where comparing fails (e.g. numpy arrays: ambiguous truth value)."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. numpy arrays among the constants
        return False


def encode_point(
    point: Mapping, by_name: Mapping[str, OptunaParam], constants: Mapping[str, Any], where: str,
) -> dict[str, Any]:
    """A point (nested or flattened keys) -> ``{param name: Optuna value}``."""
    if not isinstance(point, Mapping):
        raise ValueError(f"{where} must be a dict, got {point!r}")
    out: dict[str, Any] = {}
    names = set(by_name) | set(constants)

    def walk(node: Any, name: str) -> None:
        if name in by_name:
            if name in out:
                raise ValueError(f"{where}: {name!r} is given twice")
            out[name] = by_name[name].encode(node, where)
            return
        if name in constants:
            constant = constants[name]
            if not values_equal(constant, node):
                raise ValueError(
                    f"{where}: {name!r} is a constant ({constant!r}) of the search space, "
                    f"not a searchable parameter; got {node!r}"
                )
            return
        prefix = f"{name}/" if name else ""
        is_prefix = any(n.startswith(prefix) for n in names)
        if is_prefix and isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, f"{prefix}{k}")
            return
        if is_prefix and isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, f"{prefix}{i}")
            return
        raise ValueError(
            f"{where}: key {name!r} is not in the search space (parameters: {sorted(by_name)})"
        )

    walk(point, "")
    return out
