"""The surface a scheduler calls on whatever drives it, written once for every driver.

A scheduler acts on trials only through these calls (:class:`~schedulers.trial_scheduler.
ControllerLike` and :class:`~schedulers.resource_changing.ResourceControllerLike`): list the
trials, stop one, checkpoint one, make one exploit another, change one's resources. The rules
about when each may be called, and what a call that cannot be honoured does, are here; a driver
(tuner's controller, the simulator) subclasses :class:`TrialControl` and supplies the few
primitives that carry the calls out. A call against the rules raises
:class:`SchedulerProtocolError` in every driver alike, so a scheduler that passes the simulator's
tests behaves the same in a real sweep.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from typing import Any

from schedulers.resource_changing import Bundles, bundles_of
from schedulers.trial_status import ENDED, TrialStatus

__all__ = ["ResizingControl", "SchedulerProtocolError", "TrialControl"]


class SchedulerProtocolError(AssertionError):
    """A scheduler broke the controller protocol (a bug in the scheduler, not in the sweep)."""


class TrialControl(abc.ABC):
    """``get_trials``, ``stop_trial``, ``checkpoint_trial``, ``exploit_trial`` and
    ``set_trial_resources``, checked against the protocol; see each primitive for what a driver
    must do. The driver wraps each ``on_trial_result`` call in :meth:`deciding`."""

    _deciding: Any = None
    _replaying = False

    # -- what a driver supplies ---------------------------------------------------------------
    @abc.abstractmethod
    def get_trials(self) -> list[Any]:
        """Every trial of the experiment, in the order they were added."""

    @abc.abstractmethod
    def _stop(self, trial: Any) -> None:
        """End ``trial`` (PENDING, PAUSED or RUNNING, not the one being decided) as TERMINATED."""

    @abc.abstractmethod
    def _checkpoint(self, trial: Any) -> None:
        """Save the trial being decided after its current result, before it runs on."""

    @abc.abstractmethod
    def _has_checkpoint(self, donor: Any) -> bool:
        """Whether ``donor`` has a checkpoint to give, or one it was asked for is coming."""

    @abc.abstractmethod
    def _exploit(self, trial: Any, donor: Any, new_config: dict[str, Any]) -> None:
        """Make ``trial`` continue from ``donor``'s latest checkpoint with ``new_config``."""

    @abc.abstractmethod
    def _exploit_skipped(self, trial: Any, donor: Any) -> None:
        """``donor`` had no checkpoint: the exploit is skipped (say so; never an error)."""

    def _pausing(self, trial: Any) -> bool:
        """Whether ``trial`` answered PAUSE and its pause is still under way (a driver that saves
        asynchronously); such a trial may be exploited as a PAUSED one."""
        return False

    def _runs_on_after_pause(self, trial: Any) -> bool:
        """Whether ``trial`` runs although it answered PAUSE (its driver could not pause it: a
        function trainable that reported no checkpoint); such a trial takes an exploit after its
        current result."""
        return False

    # -- the surface, checked -----------------------------------------------------------------
    @contextlib.contextmanager
    def deciding(self, trial: Any) -> Iterator[None]:
        """While the scheduler decides on ``trial``'s result (its ``on_trial_result``)."""
        self._deciding = trial
        try:
            yield
        finally:
            self._deciding = None

    @contextlib.contextmanager
    def replaying(self) -> Iterator[None]:
        """While a resumed sweep's scheduler is told the results stored after its last snapshot
        (their decisions were acted on before the interruption, or are taken again)."""
        self._replaying = True
        try:
            yield
        finally:
            self._replaying = False

    def get_live_trials(self) -> list[Any]:
        """The trials that have not ended (PENDING, RUNNING, PAUSED)."""
        return [t for t in self.get_trials() if t.status not in ENDED]

    def stop_trial(self, trial: Any) -> None:
        """Stop a running, pending or paused trial for good (HyperBand's bracket losers)."""
        if trial is self._deciding:
            raise SchedulerProtocolError(
                f"stop_trial({trial.trial_id}) while deciding its own result: answer STOP instead")
        if trial.status in ENDED:
            return
        self._stop(trial)

    def checkpoint_trial(self, trial: Any) -> None:
        """Checkpoint the trial being decided after its current result (a PBT donor)."""
        if trial is not self._deciding:
            raise SchedulerProtocolError(
                f"checkpoint_trial({trial.trial_id}): only for the trial being decided "
                "(a paused trial's pause checkpoint serves)")
        self._checkpoint(trial)

    def exploit_trial(self, trial: Any, donor: Any, new_config: dict[str, Any]) -> bool:
        """Restore ``trial`` (the one being decided, or a PAUSED one) from ``donor``'s latest
        checkpoint with ``new_config``; False, and nothing changes, when the donor has none."""
        if (trial is not self._deciding and trial.status != TrialStatus.PAUSED and not self._pausing(trial)
                and not self._runs_on_after_pause(trial)):
            if self._replaying:
                # Synchronous PBT replaying a sync point whose exploits were applied before the
                # interruption: the trials it exploited ran on past it, as only an applied exploit lets them.
                return False
            raise SchedulerProtocolError(
                f"exploit_trial({trial.trial_id}): only the trial being decided or a PAUSED one")
        if not self._has_checkpoint(donor):
            self._exploit_skipped(trial, donor)
            return False
        self._exploit(trial, donor, new_config)
        return True


class ResizingControl(TrialControl):
    """:class:`TrialControl` plus what ``ResourceChangingScheduler`` asks of a driver that can
    change a running trial's resources (a driver without it, the simulator, never has them
    changed)."""

    @abc.abstractmethod
    def cluster_resources(self) -> dict[str, float]:
        """The cluster's total resources (name -> amount)."""

    @abc.abstractmethod
    def _resize(self, trial: Any, bundles: Bundles) -> str:
        """Give the trial being decided ``bundles``; one of ``schedulers.resource_changing``'s
        ``RESOURCES_*`` answers."""

    def set_trial_resources(self, trial: Any, bundles: Any) -> str:
        """Give the trial being decided the placement-group ``bundles`` (see
        ``ResourceControllerLike.set_trial_resources`` for the answers)."""
        if trial is not self._deciding:
            raise SchedulerProtocolError(
                f"set_trial_resources({trial.trial_id}): only for the trial being decided")
        return self._resize(trial, bundles_of(bundles))
