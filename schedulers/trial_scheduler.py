"""The TrialScheduler API: decides whether each trial continues, pauses or stops.

Pure Python, no Ray import. The method names and arguments follow Ray Tune's
``ray.tune.schedulers.TrialScheduler`` on purpose, so a scheduler written for Ray
Tune ports by changing its imports.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, runtime_checkable

from schedulers.validation import MODES as MODES  # re-exported: public here since the start
from schedulers.trial_status import TrialStatus
from schedulers.validation import check_mode as validate_mode  # the one mode check, public here too

# The statuses a scheduler sees, by the names Ray Tune's scripts import (members of TrialStatus).
PENDING = TrialStatus.PENDING
RUNNING = TrialStatus.RUNNING
PAUSED = TrialStatus.PAUSED
TERMINATED = TrialStatus.TERMINATED
ERROR = TrialStatus.ERROR
TRIAL_STATUSES = (PENDING, RUNNING, PAUSED, TERMINATED, ERROR)


@runtime_checkable
class TrialLike(Protocol):
    """What a scheduler may read of a trial."""

    trial_id: str
    config: dict[str, Any]
    #: One of PENDING, RUNNING, PAUSED, TERMINATED, ERROR. A trial whose PAUSE is still being
    #: saved stays RUNNING until its checkpoint exists, then becomes PAUSED.
    status: TrialStatus
    last_result: dict[str, Any] | None
    #: The trial's latest checkpoint, None before its first one.
    checkpoint_path: str | None


@runtime_checkable
class ControllerLike(Protocol):
    """What a scheduler may ask of the controller that drives it.

    Call order the controller guarantees:

    - ``on_trial_add`` once per trial, before anything else about it.
    - ``on_trial_result`` for every result, in order; the decision applies to that trial only.
      ``STOP`` is final: no later result of the trial reaches the scheduler, the controller calls
      ``on_trial_remove`` and never starts the trial again. After ``PAUSE`` the trial is saved,
      becomes PAUSED and runs again only when ``choose_trial_to_run`` returns it.
    - ``on_trial_complete`` when the trial ends by itself (its trainable returned, or a stop
      condition of the experiment was met), with its last result.
    - ``on_trial_error`` when it failed for good.
    - ``choose_trial_to_run`` whenever a slot may be free; when it returns None the controller
      adds a new trial from the searcher (if any is left). The trial returned may not start (its
      resources may not fit yet); it is asked for again later, so a choice with side effects
      (ASHA's promotions) must be remembered, not repeated. When nothing is running, nothing is
      chosen and no new trial comes, the sweep ends: trials still PAUSED get
      ``on_trial_complete`` with their last result and, like those still PENDING, become
      TERMINATED.

    The three methods below ``get_trials`` are what schedulers that act on *other* trials need
    (HyperBand stops the losers of a rung that wait PAUSED; PBT copies checkpoints). A
    scheduler calls them only from inside one of its own hooks.
    """

    def get_trials(self) -> list[Any]:
        """Every trial of the experiment, in the order they were added."""
        ...

    def stop_trial(self, trial: Any) -> None:
        """End ``trial`` (PENDING, PAUSED or RUNNING) as TERMINATED; it is never started again.

        Not for the trial whose result is being decided: answer STOP for that one. The
        controller may call ``scheduler.on_trial_remove(trial)`` (Ray Tune's does), possibly
        before this returns: a scheduler must tolerate that re-entrant call, and must not rely
        on it either (forget the trial itself before calling this).
        """
        ...

    def exploit_trial(self, trial: Any, donor: Any, new_config: dict[str, Any]) -> bool:
        """Make ``trial`` continue from ``donor``'s latest checkpoint, with ``new_config``; False
        (and nothing changes) when ``donor`` has no checkpoint to give, e.g. it ended without one.

        PBT's exploit step. ``trial`` is the trial whose result is being decided, or a PAUSED
        trial (or one being paused: answered PAUSE, its save still in flight). The controller
        restores ``donor``'s latest checkpoint as of this call (one asked for with
        ``checkpoint_trial`` in the same hook, or the pause save of a donor being paused,
        included; never a later one, however long ``trial`` waits to start) into ``trial``, then applies
        ``new_config`` on top (``trial.config`` becomes ``new_config``; a value in it wins over
        the one saved in the checkpoint), and records the exploit in the store. For the trial
        being decided this happens after the decision: with CONTINUE it goes on from the
        donor's state at once; with PAUSE it resumes later from the donor's checkpoint (a pause
        save of its own state, if the controller makes one, is not used). A PAUSED trial resumes
        from the donor's checkpoint when chosen. A skipped exploit is logged, never an error: a
        scheduler's choice must not end the sweep (Ray Tune's PBT skips it the same way).

        The trial's results after the exploit count on from the donor's, except the keys a
        controller lists in an ``exploit_keeps`` attribute (a tuple of result keys; none if it
        has no such attribute, as in Ray Tune): those go on from the trial's own values.
        """
        ...

    def checkpoint_trial(self, trial: Any) -> None:
        """Checkpoint ``trial`` as of its latest result so that it can be an exploit donor.

        ``trial`` is the trial whose result is being decided: it is saved after this result,
        before it runs on; when the decision is PAUSE, the pause checkpoint is this one.
        Schedulers do not ask it of PAUSED trials: their pause checkpoint serves. From the moment
        this returns, ``exploit_trial(other, trial, ...)`` must be able to use that checkpoint
        (a controller that saves asynchronously waits for, or queues behind, the save).
        """
        ...


class TrialScheduler:
    """Base class of every trial scheduler.

    The controller calls the ``on_trial_*`` hooks as trials are added, report results,
    finish, fail or are removed; ``on_trial_result`` answers with one of
    ``CONTINUE``, ``PAUSE`` or ``STOP``. ``choose_trial_to_run`` picks the next trial to
    start or resume when resources free up. ``state_dict``/``load_state_dict`` let a
    resumed sweep make the same decisions it would have made uninterrupted.

    Example:
        >>> from schedulers import FIFOScheduler
        >>> s = FIFOScheduler()
        >>> s.set_search_properties("loss", "min")
        True
    """

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    DECISIONS = (CONTINUE, PAUSE, STOP)

    #: True when this scheduler never answers PAUSE. The controller may then let a trial run
    #: a few fast iterations (a few milliseconds' worth) ahead of the decisions on them, in one
    #: round trip; results past a STOP are discarded, so what is recorded stays the same.
    never_pauses = False

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        self._metric = metric
        self._mode = validate_mode(mode)

    @property
    def metric(self) -> str | None:
        return self._metric

    @property
    def mode(self) -> str | None:
        return self._mode

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take the experiment's metric and mode where the scheduler was given none.

        Returns False when the scheduler already has a different metric or mode, so the
        controller can report the conflict.
        """
        validate_mode(mode)
        if self._metric is not None and metric is not None and metric != self._metric:
            return False
        if self._mode is not None and mode is not None and mode != self._mode:
            return False
        if self._metric is None:
            self._metric = metric
        if self._mode is None:
            self._mode = mode
        return True

    # -- trial lifecycle hooks -------------------------------------------------------------
    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        """A new trial was added to the experiment."""

    def on_trial_error(self, controller: ControllerLike, trial: TrialLike) -> None:
        """A trial failed (it may be retried)."""

    def on_trial_result(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> str:
        """A trial reported a result; answer CONTINUE, PAUSE or STOP."""
        return self.CONTINUE

    def on_trial_complete(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any] | None
    ) -> None:
        """A trial finished (its trainable returned, or it met a stop condition)."""

    def on_trial_remove(self, controller: ControllerLike, trial: TrialLike) -> None:
        """A trial was stopped by this scheduler or removed by the controller."""

    def choose_trial_to_run(self, controller: ControllerLike) -> TrialLike | None:
        """The next trial to start or resume: pending trials first, then paused ones, in order."""
        trials = controller.get_trials()
        for status in (PENDING, PAUSED):
            for trial in trials:
                if trial.status == status:
                    return trial
        return None

    def stop_means_complete(self, trial: TrialLike, result: Mapping[str, Any]) -> bool:
        """Whether a STOP answered for ``result`` ends the trial at its full budget.

        The controller tells searchers such a trial completed; any other STOP is a pruning
        (Optuna records it as PRUNED). Schedulers with a budget (``max_t``) override this.
        """
        return False

    # -- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to make the same later decisions, as plain data."""
        return {"metric": self._metric, "mode": self._mode}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
        self._metric = state.get("metric", self._metric)
        self._mode = state.get("mode", self._mode)

    def debug_string(self) -> str:
        return f"Using {type(self).__name__} scheduling algorithm."

    # -- helpers for subclasses ----------------------------------------------------------
    def _require_metric(self, result: Mapping[str, Any], *names: str) -> None:
        """Raise a ValueError naming the missing key when a result lacks a metric the scheduler needs."""
        for name in names:
            if name is not None and name not in result:
                raise ValueError(
                    f"{type(self).__name__}: metric {name!r} is not in the reported result "
                    f"(reported keys: {sorted(k for k in result)})"
                )


class FIFOScheduler(TrialScheduler):
    """Runs every trial to completion in the order they were added."""

    never_pauses = True
