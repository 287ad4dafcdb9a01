"""Each trial's newest result, held back until it becomes the trial's ``last_result``.

Writing a trial's last_result rewrites the trial's whole row (its config included, however large),
so a trial's newest result is written at most every :data:`INTERVAL_S` seconds, and at once when
someone flushes (a reader in this process, a decision made durable) or the store closes: readers
in other processes see a running trial's progress within that interval.
"""

from __future__ import annotations

import math

from .ops import LatestResult
from .plan import LastResults

__all__ = ["INTERVAL_S", "HeldLatest"]

INTERVAL_S = 0.5


class HeldLatest:
    """The newest results not written yet, by trial, and when each trial's was last written."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self._interval = interval_s
        self._held: dict[str, LatestResult] = {}
        self._written_at: dict[str, float] = {}

    def __bool__(self) -> bool:
        return bool(self._held)

    def take(self, step: LastResults) -> None:
        """A batch's newest results (and the trials an update of the batch superseded)."""
        for trial_id in step.superseded:
            self._held.pop(trial_id, None)
        self._held.update(step.rows)

    def due(self, now: float, *, everything: bool = False) -> LastResults | None:
        """The results to write now (``everything``: all of them), no longer held."""
        rows = {t: r for t, r in self._held.items()
                if everything or now - self._written_at.get(t, -math.inf) >= self._interval}
        for trial_id in rows:
            del self._held[trial_id]
            self._written_at[trial_id] = now
        return LastResults(rows) if rows else None

    def wait_s(self, now: float) -> float | None:
        """Seconds until the next held result is due (None: nothing is held)."""
        if not self._held:
            return None
        return max(0.0, min(self._written_at.get(t, -math.inf) + self._interval for t in self._held) - now)
