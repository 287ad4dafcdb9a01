"""Schedulers and searchers named in a spec, built with their parameters checked key by key.

``scheduler: asha`` or ``scheduler: {type: asha, grace_period: 2, max_t: 20}``
(``{type: pb2, hyperparam_bounds: {lr: [1.0e-4, 1.0e-3]}, ...}``: PB2's bounds as they are;
``{type: pbt_replay, policy_file: RUN_DIR, trial_id: ID}``: a stored PBT trial's schedule);
``search: random`` (grid x random, the default), ``search: grid`` (grid axes only), or
``search: {type: optuna, sampler: tpe, sampler_args: {n_startup_trials: 5}}``; any of them with
``repeat: N`` (and ``set_index: false``) runs each config as N trials and tells the searcher
their mean (``tuner.search.Repeater``: RL's seed variance).
Only plain data is accepted: no callables (PBT's ``custom_explore_fn``) come from a spec.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
from typing import Any, Mapping

from schedulers import validation
from schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    PB2,
    MedianStoppingRule,
    PopulationBasedTraining,
    PopulationBasedTrainingReplay,
    TrialScheduler,
)
from tuner.cli.checks import (
    check_keys,
    describe,
    expect_choice,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    is_int,
    join,
)
from tuner.cli.errors import SpecError
from tuner.cli.space import parse_value
from tuner.search.searcher import Searcher

SCHEDULERS: dict[str, type[TrialScheduler]] = {
    "fifo": FIFOScheduler,
    "asha": ASHAScheduler,
    "hyperband": HyperBandScheduler,
    "median": MedianStoppingRule,
    "pbt": PopulationBasedTraining,
    "pb2": PB2,
    "pbt_replay": PopulationBasedTrainingReplay,
}
SEARCHES = ("random", "grid", "optuna")
#: Optuna sampler names -> (class name in optuna.samplers, modules it needs besides optuna).
SAMPLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tpe": ("TPESampler", ()),
    "random": ("RandomSampler", ()),
    "cmaes": ("CmaEsSampler", ("cmaes",)),
    "qmc": ("QMCSampler", ("scipy",)),
    "gp": ("GPSampler", ("scipy", "torch")),
}
_NOT_FROM_SPEC = {"self", "metric", "mode", "custom_explore_fn"}  # metric/mode: the spec's own keys


def _as_typed_node(node: Any, path: str, kinds: tuple[str, ...], what: str) -> dict[str, Any]:
    """``asha`` -> {"type": "asha"}; a mapping must name its type."""
    if isinstance(node, str):
        node = {"type": node}
    node = expect_mapping(node, path)
    if "type" not in node:
        raise SpecError(join(path, "type"), f"missing (expected one of: {', '.join(kinds)})")
    expect_choice(node["type"], join(path, "type"), kinds, what)
    return node


def scheduler_parameters(kind: str) -> dict[str, inspect.Parameter]:
    """The constructor parameters a spec may set for scheduler ``kind``."""
    params = inspect.signature(SCHEDULERS[kind].__init__).parameters
    return {n: p for n, p in params.items() if n not in _NOT_FROM_SPEC and p.kind is not p.VAR_KEYWORD}


def _check_parameter(value: Any, default: Any, path: str) -> Any:
    """Check ``value`` against the type of the parameter's default; returns the value to pass."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise SpecError(path, f"expected true or false, got {describe(value)}")
    elif is_int(default):
        if not is_int(value):
            if isinstance(value, float) and not isinstance(value, bool) and not math.isnan(value):
                return value  # float budgets (max_t: 1.0e5) are fine where ints are the default
            raise SpecError(path, f"expected a number, got {describe(value)}")
    elif isinstance(default, float):
        if not validation.is_number(value, numpy=False) or math.isnan(value):
            raise SpecError(path, f"expected a number, got {describe(value)}")
    elif isinstance(default, str):
        expect_str(value, path)
    elif isinstance(default, (tuple, list)):
        items = expect_list(value, path, min_len=1)
        for i, item in enumerate(items):
            if not validation.is_number(item, numpy=False):
                raise SpecError(join(path, i), f"expected a number, got {describe(item)}")
    return value


def build_scheduler(node: Any, path: str = "scheduler") -> TrialScheduler:
    """A new scheduler from its spec node (None: FIFO)."""
    if node is None:
        return FIFOScheduler()
    node = _as_typed_node(node, path, tuple(SCHEDULERS), "scheduler")
    kind = node["type"]
    params = scheduler_parameters(kind)
    check_keys(node, path, ["type", *params])
    for name, param in params.items():
        if param.default is inspect.Parameter.empty and name not in node:
            raise SpecError(join(path, name), f"missing: scheduler {kind!r} needs it")
    kwargs: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            continue
        key_path = join(path, key)
        default = params[key].default
        if key == "seed":
            kwargs[key] = expect_int(value, key_path, minimum=0, allow_none=True)
        elif key == "hyperparam_mutations":
            mutations = expect_mapping(value, key_path)
            if not mutations:
                raise SpecError(key_path, "expected at least one config key to mutate, e.g. {lr: {loguniform: [1.0e-4, 1.0e-2]}}")
            kwargs[key] = {k: parse_value(v, join(key_path, k)) for k, v in mutations.items()}
        elif default is None or default is inspect.Parameter.empty:
            kwargs[key] = value
        else:
            kwargs[key] = _check_parameter(value, default, key_path)
    try:
        return SCHEDULERS[kind](**kwargs)
    except (ValueError, TypeError) as exc:
        raise SpecError(path, str(exc)) from None


def search_type(node: Any, path: str = "search") -> str:
    """'random', 'grid' or 'optuna' (the default: random)."""
    if node is None:
        return "random"
    return _as_typed_node(node, path, SEARCHES, "search")["type"]


def _sampler(node: Mapping[str, Any], path: str, seed: int | None) -> Any:
    name = node.get("sampler", "tpe")
    expect_choice(name, join(path, "sampler"), SAMPLERS, "optuna sampler")
    class_name, needs = SAMPLERS[name]
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        raise SpecError(join(path, "sampler"), f"optuna sampler {name!r} needs {', '.join(missing)} "
                                               f"(pip install {' '.join(missing)})")
    args = expect_mapping(node.get("sampler_args") or {}, join(path, "sampler_args"))
    import optuna

    cls = getattr(optuna.samplers, class_name)
    if seed is not None and "seed" in inspect.signature(cls).parameters and "seed" not in args:
        args["seed"] = seed
    try:
        return cls(**args)
    except (TypeError, ValueError) as exc:
        raise SpecError(join(path, "sampler_args"), f"optuna.samplers.{class_name}: {exc}") from None


def build_searcher(node: Any, seed: int | None, path: str = "search") -> Searcher:
    """A new searcher from its spec node (None: random, tune.run's default)."""
    kind = search_type(node, path)
    node = {} if node is None else _as_typed_node(node, path, SEARCHES, "search")
    allowed = ["type", "points_to_evaluate", "repeat", "set_index"] + (
        ["sampler", "sampler_args"] if kind == "optuna" else [])
    check_keys(node, path, allowed)
    points = node.get("points_to_evaluate") or []
    points_path = join(path, "points_to_evaluate")
    for i, point in enumerate(expect_list(points, points_path)):
        expect_mapping(point, join(points_path, i))
    repeat = expect_int(node.get("repeat", 1), join(path, "repeat"), minimum=1) or 1
    set_index = node.get("set_index", True)
    if not isinstance(set_index, bool):
        raise SpecError(join(path, "set_index"), f"expected true or false, got {describe(set_index)}")
    if "set_index" in node and "repeat" not in node:
        raise SpecError(join(path, "set_index"), "only with repeat: N (the trials' index in a group of repeats)")
    searcher: Searcher
    try:
        if kind == "optuna":
            from tuner.search.optuna_search import OptunaSearch

            searcher = OptunaSearch(points_to_evaluate=points, sampler=_sampler(node, path, seed))
        else:
            from tuner.search.basic_variant import BasicVariantGenerator

            searcher = BasicVariantGenerator(points_to_evaluate=points)
    except ValueError as exc:
        raise SpecError(path, str(exc)) from None
    if "repeat" not in node:
        return searcher
    from tuner.search.repeater import Repeater

    return Repeater(searcher, repeat=repeat, set_index=set_index)
