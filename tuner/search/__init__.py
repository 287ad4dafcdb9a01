"""Search spaces and searchers, with Ray Tune's names: domains, grid x random, the Searcher API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .concurrency_limiter import ConcurrencyLimiter
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

if TYPE_CHECKING:
    from .basic_variant import BasicVariantGenerator
    from .optuna_search import OptunaSearch
    from .repeater import TRIAL_INDEX, Repeater

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


#: Loaded on first use, not with every tuner import: OptunaSearch imports optuna, the generator
#: (and the Repeater over it) numpy; a trial's actor imports this package through ``tune`` and
#: needs none of them.
_LAZY = {
    "OptunaSearch": ".optuna_search",
    "BasicVariantGenerator": ".basic_variant",
    "Repeater": ".repeater",
    "TRIAL_INDEX": ".repeater",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
