"""The hyperparameters of a search space as the TensorBoard HParams export sees them.

:func:`describe_search_space` turns a search space (``tune.run``'s ``config``) into a JSON-able list,
one entry per hyperparameter, named by its dotted path (``{"model": {"lr": ...}}`` -> ``"model.lr"``,
the names the trials' configs are flattened to)::

    >>> from tuner.search.space import choice, grid_search, loguniform, randint
    >>> for entry in describe_search_space({"lr": loguniform(1e-4, 1e-1), "n": randint(1, 4),
    ...                                     "act": choice(["relu", "tanh"]), "seed": 0}):
    ...     print(entry)
    {'name': 'lr', 'kind': 'interval', 'dtype': 'float', 'min': 0.0001, 'max': 0.1, 'log': True, 'searched': True, 'source': 'loguniform(0.0001, 0.1)'}
    {'name': 'n', 'kind': 'int_interval', 'dtype': 'float', 'min': 1, 'max': 3, 'log': False, 'searched': True, 'source': 'randint(1, 4)'}
    {'name': 'act', 'kind': 'discrete', 'dtype': 'str', 'values': ['relu', 'tanh'], 'searched': True, 'source': "choice(['relu', 'tanh'])"}
    {'name': 'seed', 'kind': 'discrete', 'dtype': 'float', 'values': [0], 'searched': False}

Kinds: ``interval`` (uniform, loguniform and their quantized forms: the closed range of values),
``int_interval`` (randint and friends: the smallest and largest value that can be drawn),
``discrete`` (choice, grid_search, and constants with their one value), ``none`` (randn,
sample_from: no domain TensorBoard can show; ``dtype`` is given where it is known). ``source`` is
the call that built a searched domain. ``dtype`` is the column type in
TensorBoard: ``float`` (any number), ``bool`` or ``str``; values of a choice that mixes types, and any
value that is not a bool, number or string (lists, None, ...), are shown as text (:func:`as_text`).

The list is stored in the experiment spec (``spec["hparam_domains"]``) so that
``tuner.export_tensorboard`` can rebuild the HParams view from the store alone.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Callable

from tuner.search.space import Categorical, Domain, Float, Integer, Normal, is_grid_search
from tuner.flatten import flatten_dict
from tuner.store import codec

__all__ = ["describe_search_space", "flatten_config", "hparam_value", "as_text", "value_dtype", "normalize"]

#: Separator of nested config keys in hparam names.
SEP = "."


def normalize(value: Any) -> Any:
    """``value`` as the store keeps it (JSON round trip: numpy -> Python, tuples -> lists, ...), so
    that the live export and a rebuild from the store write the same hparam values."""
    return codec.decode(codec.encode(value))


def as_text(value: Any) -> str:
    """The text a non-scalar (or mixed-type) hparam value is shown as: ``repr`` of its stored form."""
    return value if isinstance(value, str) else repr(value)


def value_dtype(value: Any) -> str | None:
    """``"bool"``, ``"float"`` (any number) or ``"str"``; None for anything else."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, str):
        return "str"
    return None


def hparam_value(value: Any, dtype: str | None) -> bool | float | int | str:
    """A (normalized) config value as TensorBoard gets it for a column of type ``dtype``.

    A value of another type than its column is written as text (it cannot be a number in a
    text column, and the other way round is left to the plugin, which shows it as it is)."""
    natural = value_dtype(value)
    if dtype is None:
        return value if natural is not None else as_text(value)
    if natural == dtype:
        return value
    return as_text(value)


def flatten_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's config as hparams: normalized, nested dicts flattened with dotted keys."""
    normalized = normalize(dict(config))
    return flatten_dict(normalized, sep=SEP) if isinstance(normalized, dict) else {}


def _discrete(name: str, values: list[Any], searched: bool) -> dict[str, Any]:
    values = [normalize(v) for v in values]
    kinds = {value_dtype(v) for v in values}
    dtype = kinds.pop() if len(kinds) == 1 and None not in kinds else "str"
    if dtype == "str":
        values = [as_text(v) for v in values]
    unique: list[Any] = []
    for v in values:
        if not any(v == u and type(v) is type(u) for u in unique):
            unique.append(v)
    return {"name": name, "kind": "discrete", "dtype": dtype, "values": unique, "searched": searched}


def _none(name: str, dtype: str | None) -> dict[str, Any]:
    return {"name": name, "kind": "none", "dtype": dtype, "searched": True}


def _from_values(name: str, values: list[Any]) -> dict[str, Any] | None:
    """A choice's or grid axis' entry; None when its values are dicts (their keys are hparams)."""
    if all(isinstance(v, Mapping) and v for v in values):
        return None  # a conditional space: the chosen dict's keys are flattened into the config
    if any(isinstance(v, Domain) or is_grid_search(v) or _is_optuna_distribution(v) or (isinstance(v, Mapping) and v)
           for v in values):
        return _none(name, None)
    return _discrete(name, values, searched=True)


def _from_domain(name: str, domain: Domain) -> dict[str, Any] | None:
    entry = _domain_entry(name, domain)
    if entry is not None:
        entry["source"] = _safe_repr(domain)
    return entry


def _safe_repr(obj: Any) -> str:
    try:
        return repr(obj)
    except Exception:  # noqa: BLE001 - a category with a broken __repr__
        return f"<{type(obj).__name__}>"


def _domain_entry(name: str, domain: Domain) -> dict[str, Any] | None:
    if isinstance(domain, Float):
        return {"name": name, "kind": "interval", "dtype": "float", "min": float(domain.lower),
                "max": float(domain.upper), "log": bool(domain.log), "searched": True}
    if isinstance(domain, Integer):
        return {"name": name, "kind": "int_interval", "dtype": "float", "min": int(domain.low),
                "max": int(domain.high), "log": bool(domain.log), "searched": True}
    if isinstance(domain, Categorical):
        return _from_values(name, list(domain.categories))
    if isinstance(domain, Normal):
        return _none(name, "float")
    return _none(name, None)  # sample_from, or a domain this module does not know


def _is_optuna_distribution(node: Any) -> bool:
    return type(node).__module__.startswith("optuna.distributions")


def _from_optuna(name: str, dist: Any) -> dict[str, Any] | None:
    """An Optuna distribution (OptunaSearch takes them in its space), read by its attributes."""
    if hasattr(dist, "choices"):
        return _from_values(name, list(dist.choices))
    low, high = getattr(dist, "low", None), getattr(dist, "high", None)
    if not isinstance(low, numbers.Real) or not isinstance(high, numbers.Real):
        return _none(name, None)
    kind = "int_interval" if type(dist).__name__.startswith("Int") else "interval"
    cast: Callable[[Any], float] = int if kind == "int_interval" else float
    return {"name": name, "kind": kind, "dtype": "float", "min": cast(low), "max": cast(high),
            "log": bool(getattr(dist, "log", False)), "searched": True}


def _has_search_leaf(node: Any) -> bool:
    if isinstance(node, Domain) or is_grid_search(node) or _is_optuna_distribution(node):
        return True
    if isinstance(node, Mapping):
        return any(_has_search_leaf(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(_has_search_leaf(v) for v in node)
    return False


def describe_search_space(config: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One JSON-able entry per hyperparameter of ``config`` (searched ones and constants), in the
    config's order. Never raises on a valid search space; unknown leaves get kind ``none``.

    A choice or grid axis over dicts (a conditional space) has no entry of its own: the keys of the
    chosen dict are hparams of the trials that have them (the exporter finds them in the configs).
    """
    entries: list[dict[str, Any]] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        name = SEP.join(path)
        if isinstance(node, Domain):
            entry = _from_domain(name, node)
        elif _is_optuna_distribution(node):
            entry = _from_optuna(name, node)
            if entry is not None:
                entry["source"] = _safe_repr(node)
        elif is_grid_search(node):
            entry = _from_values(name, list(node["grid_search"]))
            if entry is not None:
                entry["source"] = f"grid_search({_safe_repr(node['grid_search'])})"
        elif isinstance(node, Mapping) and node:
            for key, value in node.items():
                walk(value, path + (str(key),))
            return
        elif isinstance(node, (list, tuple)) and _has_search_leaf(node):
            entry = _none(name, "str")  # a list is one (text) hparam; its sampled items vary
        else:
            entry = _discrete(name, [node], searched=False)
        if entry is not None and path:
            entries.append(entry)

    if isinstance(config, Mapping):
        walk(config, ())
    return entries
