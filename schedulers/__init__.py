"""Trial schedulers: decide which trials continue, pause or stop. Pure Python, no Ray import."""

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

__all__ = [
    "ERROR",
    "PAUSED",
    "PENDING",
    "RUNNING",
    "TERMINATED",
    "ControllerLike",
    "FIFOScheduler",
    "TrialLike",
    "TrialScheduler",
]
