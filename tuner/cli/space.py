"""The search space of a spec, written as plain YAML, turned into tuner's search-space objects.

A constant is itself; a mapping with one distribution key is a domain::

    lr: {loguniform: [1.0e-4, 3.0e-3]}        # positional arguments, as the Python helpers take
    gamma: {choice: [0.98, 0.99]}
    num_epochs: {grid: [4, 10]}                # grid axis (tune.grid_search)
    width: {qrandint: {lower: 32, upper: 256, q: 32}}   # or keyword arguments
    env_config: {size: 8}                      # any other mapping is a nested config
    weird: {const: {choice: 1}}                # a literal that looks like a distribution

A one-key mapping named like another library's distribution (``{gaussian: [0, 1]}``,
``{suggest_float: ...}``) or a misspelling of ours (``{unifrom: ...}``) is an error, not a nested
config: ``{const: {gaussian: [0, 1]}}`` is that literal mapping.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable, Iterable, Mapping

from tuner.cli.checks import describe, is_number, join
from tuner.cli.errors import SpecError
from tuner.search import space as sp
from tuner.search.space import Domain, is_grid_search

#: Distribution keys -> the tuner.search helper they call.
DISTRIBUTIONS: dict[str, Callable[..., Any]] = {
    "uniform": sp.uniform,
    "quniform": sp.quniform,
    "loguniform": sp.loguniform,
    "qloguniform": sp.qloguniform,
    "randint": sp.randint,
    "qrandint": sp.qrandint,
    "lograndint": sp.lograndint,
    "qlograndint": sp.qlograndint,
    "randn": sp.randn,
    "qrandn": sp.qrandn,
    "choice": sp.choice,
    "grid": sp.grid_search,
    "grid_search": sp.grid_search,
}
LIST_DISTRIBUTIONS = ("choice", "grid", "grid_search")  # their argument is the list of values
CONST = "const"
#: Distribution names of other libraries (Optuna, Hyperopt, W&B sweeps, numpy/scipy) -> ours, or None.
#: A one-key mapping under one of these names is a distribution written for another tool, not a
#: nested config. Names that are also common hyperparameters (gamma, beta) are left out on purpose.
FOREIGN_DISTRIBUTIONS: dict[str, str | None] = {
    "normal": "randn", "gaussian": "randn", "norm": "randn", "qnormal": "qrandn", "q_normal": "qrandn",
    "lognormal": None, "log_normal": None, "qlognormal": None, "q_log_normal": None,
    "categorical": "choice", "pchoice": "choice", "one_of": "choice",
    "int": "randint", "integer": "randint", "uniformint": "randint", "int_uniform": "randint",
    "randrange": "randint", "qint_uniform": "qrandint", "q_int_uniform": "qrandint",
    "float": "uniform", "real": "uniform", "q_uniform": "quniform", "discrete_uniform": "quniform",
    "log_uniform": "loguniform", "log_uniform_values": "loguniform", "reciprocal": "loguniform",
    "q_log_uniform": "qloguniform", "q_log_uniform_values": "qloguniform",
    "int_log_uniform": "lograndint", "log_uniform_int": "lograndint",
    "constant": CONST, "sample_from": None,
    "exponential": None, "poisson": None, "binomial": None, "bernoulli": None, "triangular": None,
}
#: Optuna's trial.suggest_* names -> ours (any other suggest_* is refused too).
OPTUNA_SUGGEST = {"float": "uniform", "uniform": "uniform", "loguniform": "loguniform", "int": "randint",
                  "categorical": "choice", "discrete_uniform": "quniform"}


def _signature(name: str) -> tuple[list[str], int]:
    params = list(inspect.signature(DISTRIBUTIONS[name]).parameters.values())
    required = sum(1 for p in params if p.default is inspect.Parameter.empty)
    return [p.name for p in params], required


def _usage(name: str) -> str:
    names, required = _signature(name)
    shown = [n if i < required else f"{n}?" for i, n in enumerate(names)]
    return f"{{{name}: [{', '.join(shown)}]}}"


def _distribution(name: str, args: Any, path: str) -> Any:
    if name in LIST_DISTRIBUTIONS:
        if not isinstance(args, list) or not args:
            raise SpecError(path, f"{name} expects a non-empty list of values, got {describe(args)}")
        try:
            return DISTRIBUTIONS[name](args)
        except ValueError as exc:
            raise SpecError(path, str(exc)) from None
    names, required = _signature(name)
    if isinstance(args, Mapping):
        unknown = [k for k in args if k not in names]
        if unknown:
            raise SpecError(join(path, unknown[0]), f"unknown argument of {name} (expected: {', '.join(names)})")
        missing = [n for n in names[:required] if n not in args]
        if missing:
            raise SpecError(path, f"{name} needs {', '.join(missing)}: {_usage(name)}")
        positional, keywords = [], dict(args)
        items: Iterable[tuple[str, Any]] = keywords.items()
    elif isinstance(args, list):
        if not required <= len(args) <= len(names):
            raise SpecError(path, f"{name} expects {_usage(name)}, got {args!r}")
        positional, keywords = args, {}
        items = zip(names, args)
    else:
        raise SpecError(path, f"{name} expects a list of arguments {_usage(name)}, got {describe(args)}")
    for arg_name, value in items:
        if not is_number(value):
            raise SpecError(path, f"{name} argument {arg_name} must be a number, got {describe(value)}")
    try:
        return DISTRIBUTIONS[name](*positional, **keywords)
    except (ValueError, TypeError) as exc:
        raise SpecError(path, f"{name}: {exc}") from None


def _foreign(key: str) -> tuple[bool, str | None]:
    """(whether ``key`` names a distribution we do not have, the one of ours it likely meant)."""
    name = key.lower().rsplit(".", 1)[-1]  # tune.uniform, hp.normal, trial.suggest_float
    ours = [*DISTRIBUTIONS, CONST]
    if name in ours:  # a different case or a module prefix: Uniform, tune.uniform
        return key != name, name
    if name in FOREIGN_DISTRIBUTIONS:
        return True, FOREIGN_DISTRIBUTIONS[name]
    if name.startswith("suggest_"):
        return True, OPTUNA_SUGGEST.get(name.removeprefix("suggest_"))
    close = difflib.get_close_matches(name, ours, n=1, cutoff=0.8)
    return (True, close[0]) if close else (False, None)


def _refuse_foreign(key: str, path: str) -> None:
    """A one-key mapping named like a distribution we do not have is an error, not a nested config."""
    foreign, ours = _foreign(key)
    if not foreign:
        return
    if ours == CONST:
        hint = f" (did you mean {{{CONST}: ...}}, a literal value?)"
    elif ours in LIST_DISTRIBUTIONS:
        hint = f" (did you mean {{{ours}: [value, ...]}}?)"
    elif ours is not None:
        hint = f" (did you mean {_usage(ours)}?)"
    else:
        hint = ""
    raise SpecError(path, f"unknown distribution {key!r}{hint}; the distributions are: {', '.join(DISTRIBUTIONS)}; "
                          f"a nested config with this one key is written {{{CONST}: {{{key}: ...}}}}")


def parse_value(node: Any, path: str) -> Any:
    """One value of the search space: a constant, a distribution, or a nested mapping."""
    if isinstance(node, Mapping):
        dist_keys = [k for k in node if k in DISTRIBUTIONS or k == CONST]
        if dist_keys:
            if len(node) != 1:
                others = ", ".join(str(k) for k in node if k != dist_keys[0])
                raise SpecError(
                    path, f"a distribution is a mapping with one key ({dist_keys[0]}), got other keys too: "
                    f"{others} (write {{const: ...}} for a literal mapping)"
                )
            key = dist_keys[0]
            return node[key] if key == CONST else _distribution(key, node[key], path)
        if len(node) == 1 and isinstance(next(iter(node)), str):
            _refuse_foreign(next(iter(node)), path)
        out = {}
        for key, value in node.items():
            if not isinstance(key, str):
                raise SpecError(join(path, key), f"config keys must be strings, got {describe(key)}")
            out[key] = parse_value(value, join(path, key))
        return out
    if isinstance(node, list):
        return [parse_value(v, join(path, i)) for i, v in enumerate(node)]
    return node


def parse_space(node: Any, path: str = "config") -> dict[str, Any]:
    """The ``config`` of a spec as tune.run's search space; it must not be empty."""
    if node is None or (isinstance(node, Mapping) and not node):
        raise SpecError(path, "the search space is empty: give at least one key, e.g. "
                              "config: {lr: {loguniform: [1.0e-4, 1.0e-2]}}")
    if not isinstance(node, Mapping):
        raise SpecError(path, f"expected a mapping of config keys (the search space), got {describe(node)}")
    if len(node) == 1 and next(iter(node)) in (*DISTRIBUTIONS, CONST):
        raise SpecError(path, f"expected a mapping of config keys, got a distribution ({next(iter(node))}); "
                              f"write it under a key, e.g. config: {{lr: {{...}}}}")
    return parse_value(node, path)


def searched_keys(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flattened key ('a/b') -> kind ('grid' or the domain's class) of every searched value."""
    found: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if is_grid_search(value):
            found[name] = "grid"
        elif isinstance(value, Domain):
            found[name] = type(value).__name__
        elif isinstance(value, Mapping):
            found.update(searched_keys(value, f"{name}/"))
    return found
