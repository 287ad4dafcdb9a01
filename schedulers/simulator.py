"""A small discrete-event simulator that drives a scheduler on synthetic learning curves.

It plays the controller's part of the protocol documented on
:class:`schedulers.trial_scheduler.ControllerLike`, deterministically and without Ray:

- trials are added in the order of ``configs``: all at the start (``add_trials="upfront"``, as
  Ray Tune does), or one at a time whenever ``choose_trial_to_run`` has nothing, as tuner's
  controller does (``"lazy"``: one PENDING trial waits ahead while the slots are full);
- at most ``n_slots`` trials run at once; running trials take one step each in turn
  (round robin); one step is one iteration, costs one unit of budget and reports one result
  ``{metric, time_attr, "training_iteration", "trial_id"}``;
- CONTINUE / PAUSE / STOP are honoured (a PAUSE saves a checkpoint; STOP is final and is
  followed by ``on_trial_remove``, or ``on_trial_complete`` with ``on_stop="complete"``, which is
  what Ray Tune's controller calls); a trial that reaches the end of its curve ends with
  ``on_trial_complete``;
- ``choose_trial_to_run`` picks what starts in a free slot; a PAUSED trial resumes from its
  checkpoint; ``stop_trial``, ``exploit_trial`` and ``checkpoint_trial`` act as documented;
- when nothing runs and nothing can start, the sweep ends; trials still PAUSED get
  ``on_trial_complete`` and, like those still PENDING, become TERMINATED.

A trial's "model" is (whose curve it follows, its position on it): a PBT exploit copies the
donor's checkpointed model and continues it under the new config. With ``curves`` a callable
``f(config, t)`` the metric depends on the config and the position only. With ``carry=True`` the
callable is ``f(config, t, previous)``, ``previous`` being the model's metric one step earlier
(None at its start): the model then carries its metric, as a network carries what it learnt, and
an exploit goes on from the donor's metric under the new config (what PB2's bandit models).

Protocol violations by a scheduler (a decision that is not CONTINUE/PAUSE/STOP, choosing a
trial that cannot run, stopping the trial whose result is being decided) raise
:class:`SchedulerProtocolError`.

    >>> from schedulers import ASHAScheduler
    >>> from schedulers.simulator import simulate
    >>> curves = {f"t{i}": [i * k for k in range(1, 10)] for i in (8, 2, 5, 0, 7, 1, 4, 6, 3)}
    >>> res = simulate(ASHAScheduler(max_t=9, reduction_factor=3), curves, metric="m", mode="max")
    >>> res.best_trial_found, res.budget_used, res.reached(9)
    ('t8', 21, ['t8'])
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import Any, Callable, Mapping, Sequence, overload

from schedulers.control import SchedulerProtocolError, TrialControl
from schedulers.trial_scheduler import TrialScheduler
from schedulers.trial_status import TrialStatus


@dataclasses.dataclass(eq=False)
class SimTrial:
    """A simulated trial: what a scheduler may read, plus the simulator's own fields."""

    trial_id: str
    config: dict[str, Any]
    status: TrialStatus = TrialStatus.PENDING
    last_result: dict[str, Any] | None = None
    checkpoint_path: str | None = None
    #: Ray Tune's own schedulers read it; lets tests drive them through this simulator.
    is_saving: bool = False
    # simulator-private: the model = (whose curve, position on it)
    curve_id: str = ""
    position: int = 0
    #: the model's metric at ``position`` (the state a ``carry=True`` curve goes on from)
    value: float | None = None
    #: iterations this trial executed (what it cost)
    steps: int = 0

    def __hash__(self) -> int:  # Ray Tune's schedulers key dicts by trial
        return id(self)

    def __repr__(self) -> str:
        return f"SimTrial({self.trial_id}, {self.status}, t={self.position})"


@dataclasses.dataclass(frozen=True)
class Event:
    """One thing that happened: ``kind`` is add, start, result, stop_trial, exploit,
    checkpoint, complete or end; ``time`` the trial's position; ``detail`` the decision of a
    result, the donor and new config of an exploit, the checkpoint restored by a start."""

    kind: str
    trial_id: str
    time: int
    detail: Any = None


@dataclasses.dataclass
class SimulationResult:
    budget_used: int
    events: list[Event]
    trials: dict[str, SimTrial]
    metric: str
    mode: str
    best_trial_found: str | None
    best_value: float | None

    @property
    def decisions(self) -> list[tuple[str, int, str]]:
        """(trial_id, time, decision) for every result, in order."""
        return [(e.trial_id, e.time, e.detail) for e in self.events if e.kind == "result"]

    def max_time(self) -> dict[str, int]:
        """The furthest time each trial reported (0 if it never did)."""
        out = {tid: 0 for tid in self.trials}
        for e in self.events:
            if e.kind == "result":
                out[e.trial_id] = max(out[e.trial_id], e.time)
        return out

    def reached(self, time: float) -> list[str]:
        """Trials that reported a result at ``time`` or later, in order of addition."""
        return [tid for tid, t in self.max_time().items() if t >= time]

    @property
    def exploits(self) -> list[Event]:
        return [e for e in self.events if e.kind == "exploit"]


Curves = Mapping[str, Sequence[float]] | Callable[[dict, int], float] | Callable[[dict, int, float | None], float]


class Simulator(TrialControl):
    """Drives ``scheduler`` on ``curves``; see the module docstring.

    Args:
        scheduler: Any TrialScheduler.
        curves: ``{trial_id: [metric at iteration 1, 2, ...]}``, or ``f(config, t) -> metric``.
        configs: With a dict of curves: optional ``{trial_id: config}`` (default
            ``{"curve": trial_id}``). With a callable: a list of configs (trial ids
            ``trial_00000``...) or a ``{trial_id: config}`` dict.
        n_slots: How many trials run at once.
        metric, mode: Passed to ``scheduler.set_search_properties``.
        time_attr: The result key holding the iteration (besides ``training_iteration``).
        max_iterations: Length of every trial with a callable; caps dict curves.
        add_trials: "upfront" (Ray Tune) or "lazy" (tuner's controller: a new trial only when a
            slot is free and the scheduler chose nothing).
        on_stop: Hook called after a STOP decision: "remove" (tuner's controller) or "complete"
            (Ray Tune's controller).
        carry: The callable is ``f(config, t, previous)`` and the model carries its metric (see
            the module docstring).
    """

    def __init__(
        self,
        scheduler: TrialScheduler,
        curves: Curves,
        configs: Sequence[dict] | Mapping[str, dict] | None = None,
        n_slots: int = 1,
        metric: str = "metric",
        mode: str = "max",
        time_attr: str = "training_iteration",
        *,
        max_iterations: int | None = None,
        add_trials: str = "upfront",
        on_stop: str = "remove",
        carry: bool = False,
    ) -> None:
        if n_slots < 1:
            raise ValueError(f"n_slots must be >= 1, got {n_slots}")
        if add_trials not in ("upfront", "lazy"):
            raise ValueError(f"add_trials must be 'upfront' or 'lazy', got {add_trials!r}")
        if on_stop not in ("remove", "complete"):
            raise ValueError(f"on_stop must be 'remove' or 'complete', got {on_stop!r}")
        self.scheduler = scheduler
        self.n_slots = n_slots
        self.metric, self.mode, self.time_attr = metric, mode, time_attr
        self.add_trials, self.on_stop = add_trials, on_stop

        if carry and not callable(curves):
            raise ValueError("carry=True needs curves to be a callable f(config, t, previous)")
        self._carry = carry
        self._fn: Callable[..., float] | None = None
        self._max_iterations = max_iterations
        self._curves: dict[str, list[float]] = {}
        if callable(curves):
            if max_iterations is None:
                raise ValueError("max_iterations is required when curves is a callable")
            if configs is None:
                raise ValueError("configs is required when curves is a callable")
            self._fn = curves
            items = (
                list(configs.items())
                if isinstance(configs, Mapping)
                else [(f"trial_{i:05d}", c) for i, c in enumerate(configs)]
            )
            self._to_add = [(tid, dict(c)) for tid, c in items]
        else:
            self._curves = {tid: list(c) for tid, c in curves.items()}
            configs = configs or {}
            if not isinstance(configs, Mapping):
                raise TypeError("configs must be a {trial_id: config} dict when curves is a dict")
            self._to_add = []
            for tid in self._curves:
                self._to_add.append((tid, dict(configs.get(tid, {"curve": tid}))))
        self._to_add.reverse()  # pop() from the end

        self.trials: list[SimTrial] = []
        self.events: list[Event] = []
        self.budget_used = 0
        self._queue: collections.deque[SimTrial] = collections.deque()
        self._checkpoints: dict[str, tuple[str, int, float | None]] = {}  # path -> (curve_id, position, value)
        self._exploit_pending: dict[str, str] = {}  # trial_id -> checkpoint path to restore
        self._started = False
        self._ended = False
        self.results_processed = 0
        self._n_running = 0
        if not scheduler.set_search_properties(metric, mode):
            raise ValueError("the scheduler's metric/mode conflict with the simulation's")

    # -- the controller protocol (its rules: schedulers/control.py) -----------------------------
    def get_trials(self) -> list[SimTrial]:
        return list(self.trials)

    def _stop(self, trial: SimTrial) -> None:
        self._set_status(trial, TrialStatus.TERMINATED)
        self._log("stop_trial", trial)
        self.scheduler.on_trial_remove(self, trial)

    def _has_checkpoint(self, donor: SimTrial) -> bool:
        return donor.checkpoint_path is not None

    def _exploit_skipped(self, trial: SimTrial, donor: SimTrial) -> None:
        self._log("exploit_skipped", trial, donor.trial_id)

    def _exploit(self, trial: SimTrial, donor: SimTrial, new_config: dict[str, Any]) -> None:
        assert donor.checkpoint_path is not None
        trial.config = copy.deepcopy(new_config)
        self._log("exploit", trial, (donor.trial_id, copy.deepcopy(new_config)))
        if trial is self._deciding:
            self._exploit_pending[trial.trial_id] = donor.checkpoint_path
        else:
            trial.checkpoint_path = donor.checkpoint_path  # resumes from the donor's state

    def _checkpoint(self, trial: SimTrial) -> None:
        self._save(trial)
        self._log("checkpoint", trial)

    # -- the loop --------------------------------------------------------------------------------
    @overload
    def run(self, max_results: None = None) -> SimulationResult: ...

    @overload
    def run(self, max_results: int) -> SimulationResult | None: ...

    def run(self, max_results: int | None = None) -> SimulationResult | None:
        """Run to the end (None: a result when done), or stop after ``max_results`` more results
        and return None (call again, possibly after swapping ``self.scheduler``)."""
        done = 0
        while max_results is None or done < max_results:
            if not self._advance():
                return self.result()
            done += 1
        return None

    def _advance(self) -> bool:
        """Process one result; False once the sweep is over."""
        if not self._started:
            self._started = True
            if self.add_trials == "upfront":
                while self._add_next():
                    pass
            self._fill()
        while self._queue:
            trial = self._queue.popleft()
            if trial.status != TrialStatus.RUNNING:
                continue  # stopped by stop_trial while waiting for its turn
            self._step(trial)
            if trial.status == TrialStatus.RUNNING:
                self._queue.append(trial)
            self._fill()
            return True
        if not self._ended:  # as tuner's controller ends a sweep
            self._ended = True
            for trial in self.trials:
                if trial.status == TrialStatus.PAUSED:
                    self._log("end", trial)
                    self.scheduler.on_trial_complete(self, trial, dict(trial.last_result or {}) or None)
                    self._set_status(trial, TrialStatus.TERMINATED)
                elif trial.status == TrialStatus.PENDING:
                    self._log("end", trial)
                    self._set_status(trial, TrialStatus.TERMINATED)
        return False

    def _add_next(self) -> bool:
        if not self._to_add:
            return False
        tid, config = self._to_add.pop()
        trial = SimTrial(trial_id=tid, config=config, curve_id=tid)
        self.trials.append(trial)
        self._log("add", trial)
        self.scheduler.on_trial_add(self, trial)
        return True

    def _set_status(self, trial: SimTrial, status: TrialStatus) -> None:
        self._n_running += (status == TrialStatus.RUNNING) - (trial.status == TrialStatus.RUNNING)
        trial.status = status

    def _running(self) -> int:
        return self._n_running

    def _fill(self) -> None:
        """tuner's controller loop: ask for a trial, add one from the search when there is none,
        start it if a slot is free, else stop asking (so, with "lazy", one PENDING trial waits
        ahead while the slots are full)."""
        while True:
            trial = self.scheduler.choose_trial_to_run(self)
            if trial is None:
                if self.add_trials == "lazy" and self._add_next():
                    continue
                return
            if trial not in self.trials or trial.status not in (TrialStatus.PENDING, TrialStatus.PAUSED):
                raise SchedulerProtocolError(
                    f"choose_trial_to_run returned {trial!r}, which is not PENDING or PAUSED"
                )
            if self._running() >= self.n_slots:
                return
            self._start(trial)

    def _start(self, trial: SimTrial) -> None:
        if trial.checkpoint_path is not None:  # resume (own pause checkpoint, or a donor's)
            trial.curve_id, trial.position, trial.value = self._checkpoints[trial.checkpoint_path]
        self._set_status(trial, TrialStatus.RUNNING)
        self._log("start", trial, trial.checkpoint_path)
        if trial.position >= self._length(trial):  # nothing left to run: the trainable returns at once
            self._complete(trial)
        else:
            self._queue.append(trial)

    def _length(self, trial: SimTrial) -> int:
        """Where the trial's model ends: its curve's end (the donor's, after an exploit)."""
        if self._fn is not None:
            assert self._max_iterations is not None  # __init__ requires it with a callable
            return self._max_iterations
        length = len(self._curves[trial.curve_id])
        return length if self._max_iterations is None else min(length, self._max_iterations)

    def _metric_at(self, trial: SimTrial) -> float:
        if self._fn is not None and self._carry:
            return float(self._fn(trial.config, trial.position, trial.value))
        if self._fn is not None:
            return float(self._fn(trial.config, trial.position))
        return float(self._curves[trial.curve_id][trial.position - 1])

    def _step(self, trial: SimTrial) -> None:
        trial.position += 1
        trial.steps += 1
        self.budget_used += 1
        trial.value = self._metric_at(trial)
        result = {
            self.metric: trial.value,
            self.time_attr: trial.position,
            "training_iteration": trial.position,
            "trial_id": trial.trial_id,
        }
        trial.last_result = result
        with self.deciding(trial):
            decision = self.scheduler.on_trial_result(self, trial, dict(result))
        self.results_processed += 1
        self._log("result", trial, decision)
        if decision not in TrialScheduler.DECISIONS:
            raise SchedulerProtocolError(
                f"on_trial_result returned {decision!r}, expected one of {TrialScheduler.DECISIONS}"
            )
        if trial.status != TrialStatus.RUNNING:
            raise SchedulerProtocolError(f"{trial.trial_id} changed status while its result was decided")
        restore = self._exploit_pending.pop(trial.trial_id, None)
        if decision == TrialScheduler.STOP:
            if self.on_stop == "complete":
                self.scheduler.on_trial_complete(self, trial, dict(result))
            else:
                self.scheduler.on_trial_remove(self, trial)
            self._set_status(trial, TrialStatus.TERMINATED)
            return
        if restore is not None:  # exploit: continue from the donor's checkpoint
            trial.checkpoint_path = restore
            trial.curve_id, trial.position, trial.value = self._checkpoints[restore]
        if decision == TrialScheduler.PAUSE:
            if restore is None:
                self._save(trial)
            self._set_status(trial, TrialStatus.PAUSED)
        elif trial.position >= self._length(trial):
            self._complete(trial)

    def _complete(self, trial: SimTrial) -> None:
        self._log("complete", trial)
        self._set_status(trial, TrialStatus.TERMINATED)
        self.scheduler.on_trial_complete(self, trial, dict(trial.last_result) if trial.last_result else None)

    def _save(self, trial: SimTrial) -> None:
        path = f"{trial.trial_id}/checkpoint_{len(self._checkpoints):06d}"
        self._checkpoints[path] = (trial.curve_id, trial.position, trial.value)
        trial.checkpoint_path = path

    def _log(self, kind: str, trial: SimTrial, detail: Any = None) -> None:
        self.events.append(Event(kind, trial.trial_id, trial.position, detail))

    # -- outcome ---------------------------------------------------------------------------------
    def result(self) -> SimulationResult:
        best_id, best_value = None, None
        sign = 1.0 if self.mode == "max" else -1.0
        for trial in self.trials:
            if trial.last_result is None:
                continue
            value = trial.last_result[self.metric]
            if best_value is None or sign * value > sign * best_value:
                best_id, best_value = trial.trial_id, value
        return SimulationResult(
            budget_used=self.budget_used,
            events=list(self.events),
            trials={t.trial_id: t for t in self.trials},
            metric=self.metric,
            mode=self.mode,
            best_trial_found=best_id,
            best_value=best_value,
        )


def simulate(
    scheduler: TrialScheduler,
    curves: Curves,
    configs: Sequence[dict] | Mapping[str, dict] | None = None,
    n_slots: int = 1,
    metric: str = "metric",
    mode: str = "max",
    time_attr: str = "training_iteration",
    **options: Any,
) -> SimulationResult:
    """Run ``scheduler`` on ``curves`` to the end; see :class:`Simulator` for the arguments."""
    return Simulator(scheduler, curves, configs, n_slots, metric, mode, time_attr, **options).run()
