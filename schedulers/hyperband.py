"""Synchronous HyperBand (Li et al. 2017, "Hyperband: A Novel Bandit-Based Approach to
Hyperparameter Optimization"), driven the way Ray Tune's ``HyperBandScheduler`` drives it.

Bracket plan (the paper's): ``s_max = floor(log_eta(max_t))``; a band holds the brackets
``s = s_max, ..., 0``; bracket ``s`` takes ``n = ceil((s_max + 1) / (s + 1) * eta**s)`` trials
and starts them with ``r = max_t * eta**-s``; in its round ``i`` the best
``n_i = floor(n * eta**-i)`` trials run on to ``r_i = r * eta**i``. For ``max_t=81, eta=3`` the
brackets are n = 81, 34, 15, 8, 5 with r = 1, 3, 9, 27, 81.

Mechanics (Ray Tune's): trials fill the current bracket as they are added (``on_trial_add``),
then the next bracket of the band, then a new band. A trial that reaches its bracket's current
budget PAUSEs; when every live trial of the bracket has reached it (or ended), the top ``n_i``
go on (``choose_trial_to_run`` resumes them) and the others are stopped: the reporting trial by
answering STOP, the paused ones through ``controller.stop_trial``. Once the last round is done
the survivors are stopped too (``stop_last_trials``).

Where Ray Tune departs from the paper, this follows the paper: Ray rounds ``s_max`` to the
nearest integer instead of down, fills brackets from ``s = 0`` up, keeps ``ceil(n_i / eta)``
trials per round instead of ``floor(n / eta**i)``, and truncates budgets to integers.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from schedulers._common import MetricScheduler, check_bool, check_number, plain
from schedulers.trial_scheduler import ControllerLike, TrialLike
from schedulers.trial_status import TrialStatus


def _as_number(x: float) -> float:
    """Snap float noise: 26.999999999999996 -> 27."""
    nearest = round(x)
    return int(nearest) if abs(x - nearest) <= 1e-9 * max(1.0, abs(x)) else x


def hyperband_plan(max_t: float, reduction_factor: float) -> list[dict[str, Any]]:
    """The paper's brackets for ``max_t`` and ``eta = reduction_factor``, most aggressive first.

    Each bracket is ``{"s", "n", "r", "rounds": [(n_i, r_i), ...]}``.

    >>> [(b["n"], b["r"]) for b in hyperband_plan(81, 3)]
    [(81, 1), (34, 3), (15, 9), (8, 27), (5, 81)]
    """
    eta = reduction_factor
    s_max = int(math.floor(math.log(max_t) / math.log(eta) + 1e-9))
    plan = []
    for s in range(s_max, -1, -1):
        n = int(math.ceil(_as_number((s_max + 1) / (s + 1) * eta**s)))
        r = _as_number(max_t * eta ** (-s))
        rounds = [(int(math.floor(_as_number(n * eta ** (-i)))), _as_number(r * eta**i)) for i in range(s + 1)]
        plan.append({"s": s, "n": n, "r": r, "rounds": rounds})
    return plan


class _Bracket:
    """One bracket's bookkeeping, as plain data (trial ids only)."""

    def __init__(self, s: int, rounds: list[tuple[int, float]], stop_last_trials: bool) -> None:
        self.s = s
        self.rounds = [(n_i, r_i) for n_i, r_i in rounds]
        self.round = 0  # index into rounds
        self.stop_last_trials = stop_last_trials
        self.live: dict[str, list[float] | None] = {}  # trial_id -> [time, score] of its last result
        self.all_trials: list[str] = []
        self.to_unpause: dict[str, None] = {}  # ordered set
        self.completed_progress = 0.0
        work, previous = 0.0, 0.0
        for n_i, r_i in self.rounds:
            work += n_i * (r_i - previous)
            previous = r_i
        self.total_work = work

    # plan
    @property
    def n(self) -> int:
        return self.rounds[0][0]

    @property
    def budget(self) -> float:
        """The time every live trial must reach before this round is decided."""
        return self.rounds[self.round][1]

    @property
    def halves_left(self) -> int:
        return len(self.rounds) - 1 - self.round

    # state
    def to_state(self) -> dict[str, Any]:
        return plain(
            {
                "s": self.s,
                "rounds": [list(r) for r in self.rounds],
                "round": self.round,
                "stop_last_trials": self.stop_last_trials,
                "live": self.live,
                "all_trials": self.all_trials,
                "to_unpause": list(self.to_unpause),
                "completed_progress": self.completed_progress,
            }
        )

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "_Bracket":
        b = cls(state["s"], [tuple(r) for r in state["rounds"]], state["stop_last_trials"])
        b.round = state["round"]
        b.live = plain(state["live"])
        b.all_trials = list(state["all_trials"])
        b.to_unpause = dict.fromkeys(state["to_unpause"])
        b.completed_progress = state["completed_progress"]
        return b

    # logic (Ray Tune's _Bracket)
    def filled(self) -> bool:
        return len(self.all_trials) >= self.n

    def add_trial(self, trial_id: str) -> None:
        self.live[trial_id] = None
        self.all_trials.append(trial_id)

    @staticmethod
    def _time(entry: list[float] | None) -> float:
        return 0 if entry is None else entry[0]

    def cur_iter_done(self) -> bool:
        return all(self._time(e) >= self.budget for e in self.live.values())

    def finished(self) -> bool:
        return self.stop_last_trials and self.halves_left == 0 and self.cur_iter_done()

    def continue_trial(self, trial_id: str) -> bool:
        if not self.stop_last_trials and self.halves_left == 0:
            return True
        return self._time(self.live[trial_id]) < self.budget

    def update(self, trial_id: str, time: float, score: float) -> None:
        self.completed_progress += max(time - self._time(self.live[trial_id]), 0)
        self.live[trial_id] = [time, score]
        self.to_unpause.pop(trial_id, None)

    def successive_halving(self) -> tuple[list[str], list[str]]:
        """Advance to the next round; return (good, bad) among the live trials."""
        if self.halves_left == 0:  # only when not stop_last_trials: everyone goes on
            return list(self.live), []
        self.round += 1
        keep = self.rounds[self.round][0]

        def score(trial_id: str) -> float:
            last = self.live[trial_id]
            return -math.inf if last is None else last[1]

        ranked = sorted(self.live, key=score)
        cut = max(len(ranked) - keep, 0)
        return ranked[cut:], ranked[:cut]

    def completion_percentage(self) -> float:
        if self.finished():
            return 1.0
        return min(self.completed_progress / self.total_work, 1.0) if self.total_work else 1.0


class HyperBandScheduler(MetricScheduler):
    """Synchronous HyperBand; Ray Tune's ``HyperBandScheduler`` arguments and mechanics.

    Args:
        time_attr: The result key that measures progress (monotonically increasing).
        metric: The result key to optimize. Taken from ``tune.run`` when None.
        mode: 'min' or 'max'. Taken from ``tune.run`` when None.
        max_t: The largest budget a trial gets (the paper's R).
        reduction_factor: The paper's eta.
        stop_last_trials: Stop the survivors of a bracket's last round; when False they run on
            until they end by themselves.

    Example:
        >>> from schedulers import HyperBandScheduler
        >>> hb = HyperBandScheduler(metric="score", mode="max", max_t=81, reduction_factor=3)
        >>> [(b["n"], b["r"]) for b in hb.plan()]
        [(81, 1), (34, 3), (15, 9), (8, 27), (5, 81)]
    """

    never_pauses = False

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        owner = type(self).__name__
        self._max_t = check_number(owner, "max_t", max_t, gt=0)
        self._eta = check_number(owner, "reduction_factor", reduction_factor, gt=1)
        self._stop_last_trials = check_bool(owner, "stop_last_trials", stop_last_trials)
        self._plan = hyperband_plan(max_t, reduction_factor)
        self._bands: list[list[_Bracket]] = [[]]
        self._trial_bracket: dict[str, list[int]] = {}  # trial_id -> [band, index in band]
        self._num_stopped = 0
        self._processing = False

    # -- introspection -------------------------------------------------------------------
    def plan(self) -> list[dict[str, Any]]:
        """The bracket plan of one band (see :func:`hyperband_plan`)."""
        return plain(self._plan)

    def brackets(self) -> list[dict[str, Any]]:
        """Every bracket opened so far: band, s, its trials, the current round and budget."""
        out = []
        for band_index, band in enumerate(self._bands):
            for b in band:
                out.append(
                    {
                        "band": band_index,
                        "s": b.s,
                        "n": b.n,
                        "trials": list(b.all_trials),
                        "live": list(b.live),
                        "round": b.round,
                        "budget": b.budget,
                    }
                )
        return out

    # -- hooks -----------------------------------------------------------------------------
    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._require_search_properties()
        self._add(trial.trial_id)

    def _add(self, trial_id: str) -> _Bracket:
        if trial_id in self._trial_bracket:
            band_index, index = self._trial_bracket[trial_id]
            return self._bands[band_index][index]
        band = self._bands[-1]
        if not band or band[-1].filled():
            if len(band) == len(self._plan):
                band = []
                self._bands.append(band)
            spec = self._plan[len(band)]
            band.append(_Bracket(spec["s"], spec["rounds"], self._stop_last_trials))
        bracket = band[-1]
        bracket.add_trial(trial_id)
        self._trial_bracket[trial_id] = [len(self._bands) - 1, len(band) - 1]
        return bracket

    def _bracket_of(self, trial_id: str) -> _Bracket | None:
        where = self._trial_bracket.get(trial_id)
        return None if where is None else self._bands[where[0]][where[1]]

    def on_trial_result(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> str:
        score = self._score(result)
        time = self._time(result)
        bracket = self._bracket_of(trial.trial_id)
        if bracket is None or trial.trial_id not in bracket.live:
            bracket = self._add(trial.trial_id) if bracket is None else bracket
            if trial.trial_id not in bracket.live:  # left its bracket already; nothing to decide
                return self.CONTINUE
        bracket.update(trial.trial_id, time, score)
        if bracket.continue_trial(trial.trial_id):
            return self.CONTINUE
        return self._process_bracket(controller, bracket, current=trial)

    def _process_bracket(
        self, controller: ControllerLike, bracket: _Bracket, current: TrialLike | None
    ) -> str:
        """Decide the round once every live trial reached its budget; the current trial's action."""
        action = self.PAUSE
        if not bracket.cur_iter_done():
            return action
        by_id = {t.trial_id: t for t in controller.get_trials()}
        current_id = None if current is None else current.trial_id
        self._processing = True
        try:
            if bracket.finished():
                for tid in list(bracket.live):
                    if tid != current_id:
                        self._stop_other(controller, bracket, by_id.get(tid), tid)
                if current_id in bracket.live:
                    bracket.live.pop(current_id)
                    self._num_stopped += 1
                return self.STOP
            good, bad = bracket.successive_halving()
            for tid in bad:
                self._num_stopped += 1
                if tid == current_id:
                    bracket.live.pop(tid)
                    action = self.STOP
                else:
                    self._stop_other(controller, bracket, by_id.get(tid), tid)
            for tid in good:
                if bracket.continue_trial(tid):
                    if tid == current_id:
                        action = self.CONTINUE
                    elif by_id.get(tid) is not None and by_id[tid].status != TrialStatus.PENDING:
                        bracket.to_unpause[tid] = None
                elif bracket.finished():
                    if tid == current_id:
                        bracket.live.pop(tid)
                        action = self.STOP
                    else:
                        self._stop_other(controller, bracket, by_id.get(tid), tid)
        finally:
            self._processing = False
        return action

    def _stop_other(self, controller: ControllerLike, bracket: _Bracket, trial: TrialLike | None, tid: str) -> None:
        bracket.live.pop(tid, None)
        bracket.to_unpause.pop(tid, None)
        if trial is not None:
            controller.stop_trial(trial)

    def on_trial_remove(self, controller: ControllerLike, trial: TrialLike) -> None:
        """A trial left (stopped, completed or failed): it no longer holds its bracket back."""
        bracket = self._bracket_of(trial.trial_id)
        if bracket is None or trial.trial_id not in bracket.live:
            return
        bracket.live.pop(trial.trial_id)
        bracket.to_unpause.pop(trial.trial_id, None)
        if not self._processing and bracket.live:
            # Those waiting PAUSED may have waited only for this one (Ray Tune skips this once a
            # bracket was halved, which can strand them until the sweep ends).
            self._process_bracket(controller, bracket, current=None)

    def on_trial_complete(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any] | None
    ) -> None:
        self.on_trial_remove(controller, trial)

    def on_trial_error(self, controller: ControllerLike, trial: TrialLike) -> None:
        self.on_trial_remove(controller, trial)

    def choose_trial_to_run(self, controller: ControllerLike) -> TrialLike | None:
        """Within each band, the least complete bracket first: a trial to resume, or a new one."""
        by_id = {t.trial_id: t for t in controller.get_trials()}
        for band in self._bands:
            for bracket in sorted(band, key=lambda b: b.completion_percentage()):
                for tid in bracket.live:
                    trial = by_id.get(tid)
                    if trial is None:
                        continue
                    if trial.status == TrialStatus.PENDING or (trial.status == TrialStatus.PAUSED and tid in bracket.to_unpause):
                        return trial
        return None

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            bands=[[b.to_state() for b in band] for band in self._bands],
            trial_bracket=plain(self._trial_bracket),
            num_stopped=self._num_stopped,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._bands = [[_Bracket.from_state(b) for b in band] for band in state["bands"]]
        self._trial_bracket = plain(state["trial_bracket"])
        self._num_stopped = state["num_stopped"]

    def debug_string(self) -> str:
        lines = [f"Using HyperBand: num_stopped={self._num_stopped} total_brackets={sum(map(len, self._bands))}"]
        for i, band in enumerate(self._bands):
            lines.append(f"Round #{i}:")
            for b in band:
                lines.append(
                    f"  Bracket(s={b.s}, n={b.n}, budget={b.budget}, live={len(b.live)}, "
                    f"completed={b.completion_percentage():.1%})"
                )
        return "\n".join(lines)
