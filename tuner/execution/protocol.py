"""What the controller and a trial actor say to each other, typed.

The controller sends calls (:class:`Call`); a ``run`` call comes back as a :class:`RunReply`: the
iterations it ran, each a :class:`Report` holding the user's result dict as the trainable gave it
and, beside it, what the controller acts on (a checkpoint written, the function returned, a
failure after earlier reports), then the actor's :class:`ActorTiming` for the sweep's profile.
Control data never travels inside the user's result dict.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class Call(enum.Enum):
    """The calls the controller has in flight on a trial actor; a save answers with the
    checkpoint's path, whatever it was for."""

    RUN = "run"  # iterations: answered by a RunReply
    EXPLOIT = "exploit"  # take a donor's checkpoint and a new config (PBT)
    CHECKPOINT = "checkpoint"  # save, and go on (a scheduler asked for a checkpoint)
    PAUSE = "pause"  # save, then the trial pauses and gives its resources back
    END = "end"  # save, then the trial ends
    RESOURCES = "resources"  # new resources in place (ResourceChangingScheduler): answered by a bool


@dataclasses.dataclass
class Report:
    """One iteration's outcome. ``result`` is None when the function trainable returned
    (``finished``) or when ``error`` (a traceback) ended the call after earlier reports."""

    result: dict[str, Any] | None
    checkpoint_path: str | None = None
    finished: bool = False
    error: str | None = None
    #: Earlier iterations' checkpoints whose uploads finished since the last report, oldest first:
    #: (URI, iteration) each, to be recorded now.
    uploaded: tuple[tuple[str, int], ...] = ()
    #: A checkpoint of this iteration still uploading to the sweep's object storage (its URI):
    #: recorded only once a later report (or a save) confirms it, never before it is there.
    uploading: str | None = None

    @property
    def ends_a_batch(self) -> bool:
        """Whether the actor must let the controller decide on this report before running on:
        the function returned or said it is done, a checkpoint was written (checkpoints only
        ever hold decided iterations), or it failed."""
        return (self.finished or self.error is not None or self.checkpoint_path is not None
                or self.uploading is not None or bool(self.uploaded) or bool(self.result and self.result.get("done")))


@dataclasses.dataclass
class ActorTiming:
    """Where a run call's time went on the actor (see ``SweepProfiler.actor_timing``)."""

    began: float  # time.time() when the call began on the actor
    setup_s: float  # building the trainable (and restoring it)
    step_s: float  # in step()
    stop_s: float  # cleaning up the previous trainable in this call
    stopped: tuple[str, float, bool] | None  # the last cleanup since the previous reply: (trial, s, in this call)


@dataclasses.dataclass
class RunReply:
    reports: list[Report]
    timing: ActorTiming
