"""The median stopping rule (Golovin et al. 2017, "Google Vizier"), as Ray Tune implements it.

A trial is stopped at time ``t`` (past ``grace_period``) when its best result so far is worse
than the median, over the other trials that got as far as ``t``, of their running averages
(the mean of their results with ``grace_period <= time <= t``), provided at least
``min_samples_required`` such averages exist. Without enough of them, the trial yields its slot
(PAUSE) when other trials are waiting, at most once per ``min_time_slice``, as in Ray Tune;
pass ``min_time_slice=float("inf")`` to never yield.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Mapping

from schedulers._common import MetricScheduler, check_bool, check_number, plain
from schedulers.trial_scheduler import ControllerLike, TrialLike
from schedulers.trial_status import TrialStatus


class _History:
    """What the rule needs of one trial's results: best score, last time, and the scores at or
    past ``grace_period`` with running sums for O(log n) running means."""

    __slots__ = ("best", "last_time", "times", "scores", "sums", "monotonic")

    def __init__(self) -> None:
        self.best: float | None = None
        self.last_time: float = -math.inf
        self.times: list[float] = []
        self.scores: list[float] = []
        self.sums: list[float] = [0.0]
        self.monotonic = True

    def add(self, time: float, score: float, grace_period: float) -> None:
        # Python's max() semantics (keep the current value unless strictly beaten), like Ray's
        # max()/min() over the list of results.
        if self.best is None or score > self.best:
            self.best = score
        self.last_time = time
        if time >= grace_period:
            if self.times and time < self.times[-1]:
                self.monotonic = False
            self.times.append(time)
            self.scores.append(score)
            self.sums.append(self.sums[-1] + score)

    def running_mean(self, time: float) -> float:
        """Mean score over results with ``grace_period <= t <= time``; NaN when there is none."""
        if self.monotonic:
            count = bisect.bisect_right(self.times, time)
            return self.sums[count] / count if count else math.nan
        window = [s for t, s in zip(self.times, self.scores) if t <= time]
        return sum(window) / len(window) if window else math.nan

    def to_state(self) -> list[Any]:
        return [self.best, self.last_time, list(self.times), list(self.scores)]

    @classmethod
    def from_state(cls, state: list[Any]) -> "_History":
        h = cls()
        h.best, h.last_time = state[0], state[1]
        for t, s in zip(state[2], state[3]):
            if h.times and t < h.times[-1]:
                h.monotonic = False
            h.times.append(t)
            h.scores.append(s)
            h.sums.append(h.sums[-1] + s)
        return h


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class MedianStoppingRule(MetricScheduler):
    """Stop trials whose best result is worse than the median of the others' running averages.

    Args:
        time_attr: The result key that measures progress (monotonically increasing).
        metric: The result key to optimize. Taken from ``tune.run`` when None.
        mode: 'min' or 'max'. Taken from ``tune.run`` when None.
        grace_period: No trial is judged before it; running averages start there.
        min_samples_required: How many other trials' averages the median needs.
        min_time_slice: Without enough samples, a trial yields its slot to waiting trials at most
            once per this much ``time_attr``. ``float("inf")``: never yield.
        hard_stop: STOP a trial below the median; when False PAUSE it instead, and let it run
            on (FIFO) if it is resumed once nothing else waits.

    Example:
        >>> from schedulers import MedianStoppingRule
        >>> m = MedianStoppingRule(time_attr="training_iteration", metric="loss", mode="min",
        ...                        grace_period=5, min_time_slice=float("inf"))
        >>> m.never_pauses
        True
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        min_time_slice: float = 0,
        hard_stop: bool = True,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        owner = type(self).__name__
        self._grace_period = check_number(owner, "grace_period", grace_period, ge=0)
        self._min_samples_required = check_number(
            owner, "min_samples_required", min_samples_required, integer=True, ge=1
        )
        self._min_time_slice = check_number(owner, "min_time_slice", min_time_slice, ge=0, allow_inf=True)
        self._hard_stop = check_bool(owner, "hard_stop", hard_stop)
        #: PAUSE happens only to yield to waiting trials (finite min_time_slice) or as the soft stop.
        self.never_pauses = hard_stop and math.isinf(min_time_slice)
        self._histories: dict[str, _History] = {}
        self._stopped: dict[str, None] = {}  # judged below the median (ordered set)
        self._finished: dict[str, None] = {}  # ended; a late on_trial_complete is ignored
        self._last_pause: dict[str, float] = {}

    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._require_search_properties()

    def _history(self, trial_id: str) -> _History:
        history = self._histories.get(trial_id)
        if history is None:
            history = self._histories[trial_id] = _History()
        return history

    def on_trial_result(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> str:
        score = self._score(result)
        time = self._time(result)
        tid = trial.trial_id
        if tid in self._stopped:  # soft-stopped and resumed: runs on, FIFO
            return self.CONTINUE
        history = self._history(tid)
        history.add(time, score, self._grace_period)
        if time < self._grace_period:
            return self.CONTINUE

        running_means = []
        for other_id, other in self._histories.items():
            if other_id == tid or other.last_time < time:
                continue
            mean = other.running_mean(time)
            if math.isfinite(mean):
                running_means.append(mean)

        if len(running_means) < self._min_samples_required:
            if self._should_yield(controller, tid, time):
                self._last_pause[tid] = time
                return self.PAUSE
            return self.CONTINUE

        median, best = _median(running_means), history.best
        assert best is not None  # history.add recorded a score above
        # Ray Tune: compare_op(median, best) != best, with compare_op = max on scores.
        if (best if best > median else median) != best:
            self._stopped[tid] = None
            if self._hard_stop:
                # Ray Tune follows a STOP with on_trial_complete(last result), which records
                # the result once more: do the same so the running means match.
                history.add(time, score, self._grace_period)
                self._finished[tid] = None
                return self.STOP
            return self.PAUSE
        return self.CONTINUE

    def _should_yield(self, controller: ControllerLike, trial_id: str, time: float) -> bool:
        if not time - self._last_pause.get(trial_id, -math.inf) > self._min_time_slice:
            return False
        return any(t.status in (TrialStatus.PENDING, TrialStatus.PAUSED) for t in controller.get_trials())

    def on_trial_complete(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any] | None
    ) -> None:
        tid = trial.trial_id
        if tid in self._finished:
            return
        self._finished[tid] = None
        if self._has_keys(result):
            self._history(tid).add(self._time(result), self._score(result), self._grace_period)

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            histories={tid: h.to_state() for tid, h in self._histories.items()},
            stopped=list(self._stopped),
            finished=list(self._finished),
            last_pause=plain(self._last_pause),
        )
        return plain(state)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._histories = {tid: _History.from_state(h) for tid, h in state["histories"].items()}
        self._stopped = dict.fromkeys(state["stopped"])
        self._finished = dict.fromkeys(state["finished"])
        self._last_pause = plain(state["last_pause"])

    def debug_string(self) -> str:
        return f"Using MedianStoppingRule: num_stopped={len(self._stopped)}."
