"""The ``tune`` namespace: ``from tuner import tune`` then ``tune.run(...)``, as in Ray Tune.

What a trial needs (report, Checkpoint, Trainable, search-space helpers) is imported at once
and is light; the driver's side (run, load, ExperimentAnalysis, Tuner and its configs, ResultGrid:
Ray, SQLAlchemy, pandas) is imported on first use, so ``from tuner import tune`` inside every trial
actor stays cheap. ``from tuner.tune import Tuner, TuneConfig, RunConfig`` works as Ray Tune's
``from ray.tune import ...`` does.
"""

from typing import Any

from schedulers import FIFOScheduler, TrialScheduler
from tuner.callback import Callback
from tuner.errors import TuneError
from tuner.execution.resources import PlacementGroupFactory
from tuner.registry import register_trainable
from tuner.search import (
    Searcher,
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
from tuner.stopper import (
    CombinedStopper,
    FunctionStopper,
    MaximumIterationStopper,
    Stopper,
    TimeoutStopper,
    TrialPlateauStopper,
)
from tuner.trainable import Checkpoint, Trainable, get_checkpoint, get_context, report

__all__ = [
    "BasicVariantGenerator",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "CombinedStopper",
    "ExperimentAnalysis",
    "FIFOScheduler",
    "FailureConfig",
    "FunctionStopper",
    "MaximumIterationStopper",
    "PlacementGroupFactory",
    "Result",
    "ResultGrid",
    "RunConfig",
    "Searcher",
    "Stopper",
    "TimeoutStopper",
    "Trainable",
    "TrialPlateauStopper",
    "TrialScheduler",
    "TuneConfig",
    "TuneError",
    "Tuner",
    "choice",
    "export_tensorboard",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "load",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "register_trainable",
    "report",
    "run",
    "sample_from",
    "uniform",
    "with_parameters",
    "with_resources",
]

_LAZY = {
    "BasicVariantGenerator": ("tuner.search.basic_variant", "BasicVariantGenerator"),
    "run": ("tuner.api", "run"),
    "load": ("tuner.analysis", "load"),
    "ExperimentAnalysis": ("tuner.analysis", "ExperimentAnalysis"),
    "export_tensorboard": ("tuner.tensorboard.rebuild", "export_tensorboard"),
    "Tuner": ("tuner.tuner", "Tuner"),
    "TuneConfig": ("tuner.tune_config", "TuneConfig"),
    "RunConfig": ("tuner.tune_config", "RunConfig"),
    "CheckpointConfig": ("tuner.tune_config", "CheckpointConfig"),
    "FailureConfig": ("tuner.tune_config", "FailureConfig"),
    "ResultGrid": ("tuner.result_grid", "ResultGrid"),
    "Result": ("tuner.result_grid", "Result"),
    "with_parameters": ("tuner.trainable.util", "with_parameters"),
    "with_resources": ("tuner.trainable.util", "with_resources"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tuner.tune' has no attribute {name!r}")
