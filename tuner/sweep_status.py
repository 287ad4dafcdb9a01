"""A sweep's status (``experiments.status`` in the store): one ``str`` enum, so a member compares
equal to the stored string and prints as it. A trial's own statuses are ``TrialStatus``."""

from __future__ import annotations

from schedulers.trial_status import StatusEnum

__all__ = ["SweepStatus"]


class SweepStatus(StatusEnum):
    """Where a sweep stands, as the store and the query verbs show it."""

    #: Recorded in the store, not started yet.
    PENDING = "PENDING"
    #: Recorded by ``tuner submit`` before it returned: its driver (a Ray Job) has not started yet.
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    #: Ran to its end (its trials may still have failed: they say so themselves).
    TERMINATED = "TERMINATED"
    #: The driver failed (not a trial: those are retried or end as ERROR on their own).
    ERROR = "ERROR"
    #: Stopped before it finished (Ctrl-C, SIGTERM, a driver that died without a word): resumable.
    INTERRUPTED = "INTERRUPTED"
    #: The time budget was spent before every trial ran: a resume finishes it.
    INCOMPLETE = "INCOMPLETE"
