"""Trial schedulers: decide which trials continue, pause or stop. Pure Python, no Ray import."""

from schedulers.asha import ASHAScheduler, AsyncHyperBandScheduler
from schedulers.hyperband import HyperBandScheduler
from schedulers.median_stopping import MedianStoppingRule
from schedulers.pb2 import PB2
from schedulers.pbt import PopulationBasedTraining
from schedulers.pbt_replay import PopulationBasedTrainingReplay
from schedulers.resource_changing import (
    DistributeResources,
    DistributeResourcesToTopJob,
    ResourceChangingScheduler,
)
from schedulers.trial_scheduler import (
    ERROR,
    PAUSED,
    PENDING,
    RUNNING,
    TERMINATED,
    ControllerLike,
    FIFOScheduler,
    TrialLike,
    TrialScheduler,
)
from schedulers.trial_status import TrialStatus

__all__ = [
    "ERROR",
    "PAUSED",
    "PENDING",
    "RUNNING",
    "TERMINATED",
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "ControllerLike",
    "DistributeResources",
    "DistributeResourcesToTopJob",
    "FIFOScheduler",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PB2",
    "PopulationBasedTraining",
    "PopulationBasedTrainingReplay",
    "ResourceChangingScheduler",
    "TrialLike",
    "TrialScheduler",
    "TrialStatus",
]
