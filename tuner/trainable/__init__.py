"""What runs inside a trial: the Trainable class API, the function API's session, checkpoints."""

from tuner.trainable.checkpoint import Checkpoint
from tuner.trainable.context import TrainContext, TrialInfo
from tuner.trainable.function_trainable import FunctionTrainable, wrap_function
from tuner.trainable.session import get_checkpoint, get_context, report
from tuner.trainable.trainable import Trainable

__all__ = [
    "Checkpoint",
    "FunctionTrainable",
    "TrainContext",
    "Trainable",
    "TrialInfo",
    "get_checkpoint",
    "get_context",
    "report",
    "wrap_function",
]
