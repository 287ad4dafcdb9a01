"""Asynchronous successive halving (ASHA), in its two variants.

Default: the stopping rule Ray Tune ships as ``AsyncHyperBandScheduler``. Rungs sit at
``grace_period * reduction_factor**k`` (up to ``max_t``). The first time a trial's ``time_attr``
reaches a rung, its score is compared with the ``(1 - 1/reduction_factor)`` quantile
(``numpy.nanpercentile``) of the scores recorded at that rung so far, then recorded; below the
quantile it is stopped. The first arrival at a rung always passes. A trial that reaches ``max_t``
is stopped when ``stop_last_trials``. Nothing ever pauses, so a script ported from Ray Tune makes
the same decisions on the same stream of results.

``promotion=True``: the paper's promotion variant (Li et al. 2018, "A System for Massively
Parallel Hyperparameter Tuning", Algorithm 2). A trial pauses at every rung; when a slot frees,
``choose_trial_to_run`` promotes a paused trial that is among the top ``floor(n_k / eta)`` of its
rung ``k`` and was not promoted from it yet (highest rung first), else starts a new trial.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping

import numpy as np

from schedulers._common import (
    MetricScheduler,
    check_bool,
    check_number,
    check_seed,
    plain,
    rng_state_from_plain,
    rng_state_to_plain,
)
from schedulers.trial_scheduler import ControllerLike, TrialLike
from schedulers.trial_status import TrialStatus


def rung_milestones(grace_period: float, max_t: float, reduction_factor: float, s: int) -> list[float]:
    """Milestones of bracket ``s``, ascending, computed exactly as Ray Tune does (float log)."""
    count = int(np.log(max_t / grace_period) / np.log(reduction_factor) - s + 1)
    return [grace_period * reduction_factor ** (k + s) for k in range(max(count, 0))]


class ASHAScheduler(MetricScheduler):
    """Asynchronous successive halving; Ray Tune's ``ASHAScheduler``/``AsyncHyperBandScheduler``.

    Args:
        time_attr: The result key that measures progress (monotonically increasing).
        metric: The result key to optimize. Taken from ``tune.run`` when None.
        mode: 'min' or 'max'. Taken from ``tune.run`` when None.
        max_t: A trial is stopped once ``time_attr`` reaches it (when ``stop_last_trials``).
        grace_period: The first rung; no trial is stopped before it.
        reduction_factor: Rungs are ``reduction_factor`` apart; about ``1/reduction_factor`` of
            the trials pass each rung.
        brackets: Number of brackets; bracket ``s`` starts its rungs at
            ``grace_period * reduction_factor**s``. A trial joins bracket ``s`` with probability
            proportional to ``exp(number of rungs of s)``, as in Ray Tune (drawn from ``seed``).
        stop_last_trials: Stop trials at ``max_t``; when False they run on until they end.
        promotion: Use the paper's promotion variant (pause at each rung, promote the top
            ``1/reduction_factor``) instead of Ray Tune's stopping rule.
        seed: Seed of the bracket draw (only used when ``brackets > 1``).

    Example:
        >>> from schedulers import ASHAScheduler
        >>> s = ASHAScheduler(metric="loss", mode="min", max_t=27, grace_period=1, reduction_factor=3)
        >>> s.rung_milestones()
        [1, 3, 9, 27]
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
        *,
        promotion: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        owner = type(self).__name__
        self._max_t = check_number(owner, "max_t", max_t, gt=0)
        self._grace_period = check_number(owner, "grace_period", grace_period, gt=0)
        if grace_period > max_t:
            raise ValueError(
                f"{owner}: grace_period must be <= max_t ({max_t!r}), got {grace_period!r}"
            )
        self._reduction_factor = check_number(owner, "reduction_factor", reduction_factor, gt=1)
        self._num_brackets = check_number(owner, "brackets", brackets, integer=True, ge=1)
        self._stop_last_trials = check_bool(owner, "stop_last_trials", stop_last_trials)
        self._promotion = check_bool(owner, "promotion", promotion)
        self._seed = check_seed(owner, seed)
        self.never_pauses = not promotion

        # Per bracket, per rung (ascending milestones): trial_id -> score recorded there.
        self._milestones: list[list[float]] = []
        for s in range(self._num_brackets):
            milestones = rung_milestones(grace_period, max_t, reduction_factor, s)
            if promotion:  # the last rung of the promotion variant is max_t itself
                milestones = [m for m in milestones if m < max_t] + [max_t]
            self._milestones.append([int(m) if float(m).is_integer() else m for m in milestones])
        self._recorded: list[list[dict[str, float]]] = [[{} for _ in ms] for ms in self._milestones]
        self._trial_bracket: dict[str, int] = {}
        self._rng = random.Random(seed)
        self._num_stopped = 0
        # The two algorithms share the rungs above; each is one object with the same hooks.
        self._rule: _StoppingRule | _PromotionRule = _PromotionRule(self) if promotion else _StoppingRule(self)

    # -- introspection -------------------------------------------------------------------
    @property
    def promotion(self) -> bool:
        return self._promotion

    def rung_milestones(self, bracket: int = 0) -> list[float]:
        """The rungs of ``bracket``, ascending."""
        return list(self._milestones[bracket])

    def rung_trials(self, bracket: int = 0) -> dict[float, list[str]]:
        """For each rung of ``bracket``, the trials recorded there, in order of arrival."""
        return {m: list(rec) for m, rec in zip(self._milestones[bracket], self._recorded[bracket])}

    # -- hooks -----------------------------------------------------------------------------
    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._require_search_properties()
        self._assign(trial.trial_id)

    def _assign(self, trial_id: str) -> int:
        if trial_id in self._trial_bracket:
            return self._trial_bracket[trial_id]
        if self._num_brackets == 1:
            index = 0
        else:  # Ray Tune: softmax over the number of rungs of each bracket
            sizes = np.array([len(ms) for ms in self._milestones], dtype=float)
            weights = np.e ** (sizes - sizes.max())
            index = self._rng.choices(range(self._num_brackets), weights=list(weights / weights.sum()))[0]
        self._trial_bracket[trial_id] = index
        self._rule.added(trial_id)
        return index

    def on_trial_result(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> str:
        return self._rule.on_result(trial.trial_id, self._time(result), self._score(result))

    def on_trial_complete(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any] | None
    ) -> None:
        self._rule.on_complete(trial.trial_id, result)
        self._forget(trial.trial_id)

    def on_trial_remove(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._forget(trial.trial_id)

    def choose_trial_to_run(self, controller: ControllerLike) -> TrialLike | None:
        return self._rule.choose(controller)

    def _forget(self, trial_id: str) -> None:
        self._trial_bracket.pop(trial_id, None)
        self._rule.forget(trial_id)

    def _stop(self, trial_id: str) -> str:
        self._num_stopped += 1
        self._forget(trial_id)
        return self.STOP

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            recorded=plain(self._recorded),
            trial_bracket=plain(self._trial_bracket),
            num_stopped=self._num_stopped,
            rng=rng_state_to_plain(self._rng.getstate()),
            **self._rule.state_dict(),
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        recorded = plain(state["recorded"])
        if [len(r) for r in recorded] != [len(m) for m in self._milestones]:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has rungs "
                f"{[len(r) for r in recorded]} per bracket, this scheduler {[len(m) for m in self._milestones]}; "
                "construct it with the same max_t, grace_period, reduction_factor and brackets"
            )
        self._recorded = recorded
        self._trial_bracket = plain(state["trial_bracket"])
        self._num_stopped = state["num_stopped"]
        self._rng.setstate(rng_state_from_plain(state["rng"]))
        self._rule.load_state_dict(state)

    def debug_string(self) -> str:
        lines = [f"Using {'ASHA (promotion)' if self._promotion else 'AsyncHyperBand'}: num_stopped={self._num_stopped}"]
        for b, (ms, recs) in enumerate(zip(self._milestones, self._recorded)):
            lines.append(f"Bracket {b}: " + " | ".join(f"Iter {m}: {len(r)} trials" for m, r in zip(ms, recs)))
        return "\n".join(lines)


class _StoppingRule:
    """Ray Tune's stopping rule (``AsyncHyperBandScheduler``): nothing pauses; a trial below the
    rung's quantile when it first reaches a rung is stopped."""

    def __init__(self, asha: ASHAScheduler) -> None:
        self.asha = asha

    def added(self, trial_id: str) -> None:
        pass

    def forget(self, trial_id: str) -> None:
        pass

    def on_result(self, trial_id: str, time: float, score: float) -> str:
        asha = self.asha
        bracket = asha._assign(trial_id)
        if time >= asha._max_t and asha._stop_last_trials:
            action = asha.STOP
        else:
            action = self._bracket_result(bracket, trial_id, time, score)
        if action == asha.STOP:
            # Ray Tune follows a STOP with on_trial_complete(last result), which records the
            # result once more (it can fill a lower rung a trial jumped over): do the same here.
            self._bracket_result(bracket, trial_id, time, score)
            return asha._stop(trial_id)
        return action

    def on_complete(self, trial_id: str, result: Mapping[str, Any] | None) -> None:
        asha = self.asha
        if trial_id in asha._trial_bracket and asha._has_keys(result):
            self._bracket_result(asha._trial_bracket[trial_id], trial_id, asha._time(result), asha._score(result))

    def choose(self, controller: ControllerLike) -> TrialLike | None:
        return MetricScheduler.choose_trial_to_run(self.asha, controller)  # every scheduler's default

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass

    def _cutoff(self, recorded: dict[str, float]) -> float | None:
        """The rung's cutoff: Ray Tune's ``nanpercentile`` of its scores; None while it holds
        none but NaN (no episode has ended yet: nothing to cut on, and no numpy warning)."""
        scores = [score for score in recorded.values() if not np.isnan(score)]
        if not scores:
            return None
        return float(np.percentile(scores, (1 - 1 / self.asha._reduction_factor) * 100))

    def _bracket_result(self, bracket: int, trial_id: str, time: float, score: float) -> str:
        """Ray Tune's ``_Bracket.on_result``: rungs scanned from the top down."""
        asha = self.asha
        action = asha.CONTINUE
        milestones, recorded_by_rung = asha._milestones[bracket], asha._recorded[bracket]
        for milestone, recorded in zip(reversed(milestones), reversed(recorded_by_rung)):
            if time >= milestone and trial_id in recorded and not asha._stop_last_trials:
                break
            if time < milestone or trial_id in recorded:
                continue
            cutoff = self._cutoff(recorded)
            if cutoff is not None and score < cutoff:
                action = asha.STOP
            recorded[trial_id] = score
            break
        return action


class _PromotionRule:
    """The paper's promotion variant (Li et al. 2018, Algorithm 2): a trial pauses at every rung,
    and a free slot promotes the best paused trial of the highest rung that has one to promote."""

    def __init__(self, asha: ASHAScheduler) -> None:
        self.asha = asha
        self.promoted: list[list[dict[str, None]]] = [[{} for _ in ms] for ms in asha._milestones]
        self.target: dict[str, int] = {}  # trial_id -> index of the rung it runs towards
        self.promoting: dict[str, None] = {}  # promoted, but not resumed yet

    def added(self, trial_id: str) -> None:
        self.target[trial_id] = 0

    def forget(self, trial_id: str) -> None:
        self.target.pop(trial_id, None)
        self.promoting.pop(trial_id, None)

    def on_result(self, trial_id: str, time: float, score: float) -> str:
        asha = self.asha
        bracket = asha._assign(trial_id)
        self.promoting.pop(trial_id, None)  # it resumed
        milestones = asha._milestones[bracket]
        k = self.target[trial_id]  # the rung it runs towards (or waits at, once recorded there)
        if time >= milestones[k]:
            asha._recorded[bracket][k].setdefault(trial_id, score)
            if k < len(milestones) - 1:
                return asha.PAUSE  # waits at rung k until promoted
            return asha._stop(trial_id) if asha._stop_last_trials else asha.CONTINUE
        if time >= asha._max_t and asha._stop_last_trials:
            return asha._stop(trial_id)
        return asha.CONTINUE

    def on_complete(self, trial_id: str, result: Mapping[str, Any] | None) -> None:
        pass

    def choose(self, controller: ControllerLike) -> TrialLike | None:
        """A trial to promote, else the first pending one, else None."""
        trial = self._promotable(controller)
        if trial is not None:
            return trial
        return next((t for t in controller.get_trials() if t.status == TrialStatus.PENDING), None)

    def _promotable(self, controller: ControllerLike) -> TrialLike | None:
        asha = self.asha
        by_id = {t.trial_id: t for t in controller.get_trials()}
        # A promotion decided earlier whose trial could not start yet comes first.
        for tid in self.promoting:
            trial = by_id.get(tid)
            if trial is not None and trial.status == TrialStatus.PAUSED:
                return trial
        for bracket, recorded_by_rung in enumerate(asha._recorded):
            for k in reversed(range(len(recorded_by_rung) - 1)):  # no promotion from the last rung
                recorded = recorded_by_rung[k]
                top = math.floor(len(recorded) / asha._reduction_factor)
                if top <= 0:
                    continue
                ranked = sorted(recorded, key=recorded.__getitem__, reverse=True)  # stable: arrival order
                for tid in ranked[:top]:
                    if tid in self.promoted[bracket][k]:
                        continue
                    trial = by_id.get(tid)
                    if trial is None or trial.status != TrialStatus.PAUSED or self.target.get(tid) != k:
                        continue
                    self.promoted[bracket][k][tid] = None
                    self.target[tid] = k + 1
                    self.promoting[tid] = None
                    return trial
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"promoted": [[list(p) for p in rungs] for rungs in self.promoted],
                "target": plain(self.target), "promoting": list(self.promoting)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.promoted = [[dict.fromkeys(p) for p in rungs] for rungs in state["promoted"]]
        self.target = plain(state["target"])
        self.promoting = dict.fromkeys(state["promoting"])


#: Ray Tune's other name for the same scheduler.
AsyncHyperBandScheduler = ASHAScheduler
