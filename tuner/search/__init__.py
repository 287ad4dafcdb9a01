"""Search spaces and searchers, with Ray Tune's names: domains, grid x random, the Searcher API."""

from __future__ import annotations

from .basic_variant import BasicVariantGenerator
from .concurrency_limiter import ConcurrencyLimiter
from .repeater import TRIAL_INDEX, Repeater
from .searcher import Searcher
from .space import (
    Categorical,
    Domain,
    Float,
    Function,
    Integer,
    Normal,
    SampleSpec,
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from .variants import (
    count_grid_points,
    flatten_dict,
    grid_variants,
    iter_domains,
    resolve_config,
    unflatten_dict,
)

__all__ = [
    "Searcher",
    "BasicVariantGenerator",
    "OptunaSearch",
    "ConcurrencyLimiter",
    "Repeater",
    "TRIAL_INDEX",
    "Domain",
    "Float",
    "Integer",
    "Categorical",
    "Normal",
    "Function",
    "SampleSpec",
    "uniform",
    "quniform",
    "loguniform",
    "qloguniform",
    "randint",
    "qrandint",
    "lograndint",
    "qlograndint",
    "randn",
    "qrandn",
    "choice",
    "sample_from",
    "grid_search",
    "count_grid_points",
    "grid_variants",
    "iter_domains",
    "resolve_config",
    "flatten_dict",
    "unflatten_dict",
]


def __getattr__(name: str):
    # OptunaSearch imports optuna (~0.1 s): loaded on first use, not with every tuner import.
    if name == "OptunaSearch":
        from .optuna_search import OptunaSearch

        return OptunaSearch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
