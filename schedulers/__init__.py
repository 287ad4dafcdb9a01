"""Trial schedulers: decide which trials continue, pause or stop. Pure Python, no Ray import.

A scheduler's module is imported when its name is first used (``from schedulers import PB2``), so
a process that needs none of them (a trial's actor, through ``import tuner``) does not pay for
numpy, scikit-learn and the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Each public name, by the module that defines it.
_WHERE = {
    "ASHAScheduler": "schedulers.asha",
    "AsyncHyperBandScheduler": "schedulers.asha",
    "HyperBandScheduler": "schedulers.hyperband",
    "MedianStoppingRule": "schedulers.median_stopping",
    "PB2": "schedulers.pb2",
    "PopulationBasedTraining": "schedulers.pbt",
    "PopulationBasedTrainingReplay": "schedulers.pbt_replay",
    "DistributeResources": "schedulers.resource_changing",
    "DistributeResourcesToTopJob": "schedulers.resource_changing",
    "ResourceChangingScheduler": "schedulers.resource_changing",
    "ERROR": "schedulers.trial_scheduler",
    "PAUSED": "schedulers.trial_scheduler",
    "PENDING": "schedulers.trial_scheduler",
    "RUNNING": "schedulers.trial_scheduler",
    "TERMINATED": "schedulers.trial_scheduler",
    "ControllerLike": "schedulers.trial_scheduler",
    "FIFOScheduler": "schedulers.trial_scheduler",
    "TrialLike": "schedulers.trial_scheduler",
    "TrialScheduler": "schedulers.trial_scheduler",
    "TrialStatus": "schedulers.trial_status",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'schedulers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


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
