"""The ``tune`` namespace: ``from tuner import tune`` then ``tune.run(...)``, as in Ray Tune."""

from schedulers import FIFOScheduler, TrialScheduler
from tuner.analysis import ExperimentAnalysis, load
from tuner.api import run
from tuner.errors import TuneError
from tuner.execution.resources import PlacementGroupFactory
from tuner.registry import register_trainable
from tuner.search import (
    BasicVariantGenerator,
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
    "Checkpoint",
    "CombinedStopper",
    "ExperimentAnalysis",
    "FIFOScheduler",
    "FunctionStopper",
    "MaximumIterationStopper",
    "PlacementGroupFactory",
    "Searcher",
    "Stopper",
    "TimeoutStopper",
    "Trainable",
    "TrialPlateauStopper",
    "TrialScheduler",
    "TuneError",
    "choice",
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
]
