"""A trial's status: one ``str`` enum, so a member compares equal to the string the store keeps
(``TrialStatus.RUNNING == "RUNNING"``) and prints as that string."""

from __future__ import annotations

from enum import Enum

__all__ = ["ENDED", "StatusEnum", "TrialStatus"]


class StatusEnum(str, Enum):
    """A status stored as its string: equal to it, and printed as it (``str``, f-strings, ``%s``)
    on every Python this package supports (3.10's mixed-in ``format`` and 3.11's ``str`` differ)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)


class TrialStatus(StatusEnum):
    """The statuses a trial goes through (the same strings Ray Tune uses, and ``INTERRUPTED``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"
    #: Stopped before it finished (Ctrl-C, SIGTERM, an error in the driver): not a scheduler
    #: status; a resume runs such a trial again from its last checkpoint.
    INTERRUPTED = "INTERRUPTED"


#: A trial in one of these will not run again in this sweep (``status in ENDED``, a stored string too).
ENDED = (TrialStatus.TERMINATED, TrialStatus.ERROR)
