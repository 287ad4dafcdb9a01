"""Population Based Training (Jaderberg et al. 2017), with Ray Tune's arguments and semantics.

Every ``perturbation_interval`` of ``time_attr`` (once past ``burn_in_period``) a trial is
ranked, by the score recorded at its last perturbation, against the rest of the population:

- in the top ``quantile_fraction``: it is checkpointed (``controller.checkpoint_trial``) and
  becomes a possible donor;
- in the bottom ``quantile_fraction``: it exploits a random donor of the top quantile that was
  checkpointed at its own last perturbation (``controller.exploit_trial``), with a config
  explored from the donor's: each key of ``hyperparam_mutations`` is resampled with
  ``resample_probability``, else perturbed (numbers multiplied by one of
  ``perturbation_factors``, list values moved to a neighbouring entry), then
  ``custom_explore_fn(config)`` is applied.

Asynchronous (default): each trial is perturbed on its own schedule; as in Ray Tune it answers
PAUSE at a perturbation point when other trials wait (PENDING or PAUSED) so the population
shares the slots, CONTINUE otherwise; ``choose_trial_to_run`` resumes the trial that is furthest
behind. ``synch=True``: trials PAUSE at each perturbation point until every live trial got
there, then the whole population is ranked at once and resumed.

Departures from Ray Tune: a ``hyperparam_mutations`` key that is not in the config is an error
(Ray Tune samples it); perturbed values of a domain with bounds are clipped to them; a
categorical domain over non-numbers is perturbed like a list; random draws come from ``seed``.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from schedulers._common import (
    MetricScheduler,
    arg_error,
    check_bool,
    check_number,
    check_seed,
    plain,
    rng_state_from_plain,
    rng_state_to_plain,
)
from schedulers.trial_scheduler import ControllerLike, TrialLike
from schedulers.trial_status import ENDED, TrialStatus
from schedulers.validation import is_number


def _is_domain(value: Any) -> bool:
    return hasattr(value, "sample") and callable(value.sample)


class _TrialState:
    __slots__ = ("last_score", "checkpointed", "last_perturbation_time", "last_train_time")

    def __init__(self) -> None:
        self.last_score: float | None = None
        self.checkpointed = False  # checkpointed at its last perturbation: may be a donor
        self.last_perturbation_time: float = 0
        self.last_train_time: float = 0

    def to_state(self) -> list[Any]:
        return [self.last_score, self.checkpointed, self.last_perturbation_time, self.last_train_time]

    @classmethod
    def from_state(cls, state: Sequence[Any]) -> "_TrialState":
        s = cls()
        s.last_score, s.checkpointed, s.last_perturbation_time, s.last_train_time = state
        return s


class PopulationBasedTraining(MetricScheduler):
    """Population Based Training; Ray Tune's ``PopulationBasedTraining`` arguments.

    Args:
        time_attr: The result key that measures progress (monotonically increasing).
        metric: The result key to optimize. Taken from ``tune.run`` when None.
        mode: 'min' or 'max'. Taken from ``tune.run`` when None.
        perturbation_interval: Perturb a trial every this much ``time_attr``.
        burn_in_period: No perturbation before this much ``time_attr``.
        hyperparam_mutations: For each config key to explore: a list of values, a no-argument
            callable, a search-space domain (``tune.uniform(...)``...; anything with
            ``.sample(rng)``), or a dict of these for a nested config.
        quantile_fraction: Fraction of the population in the top (donors) and in the bottom
            (exploiters) quantile, in [0, 0.5].
        resample_probability: Probability of resampling a value instead of perturbing it.
        perturbation_factors: Factors a continuous value is multiplied by when perturbed.
        custom_explore_fn: ``f(config) -> config`` applied after the built-in exploration.
        log_config: Accepted for Ray Tune compatibility; the exploits are always kept in
            :meth:`exploit_log` and the controller records them in the store.
        require_attrs: Raise when a result lacks ``time_attr`` or ``metric``; when False such a
            result is ignored (CONTINUE).
        synch: Synchronous PBT (perturb the whole population at once).
        seed: Seed of every random draw (donor choice, exploration).

    Example:
        >>> from schedulers import PopulationBasedTraining
        >>> pbt = PopulationBasedTraining(time_attr="training_iteration", metric="reward",
        ...     mode="max", perturbation_interval=5, hyperparam_mutations={"lr": [1e-4, 1e-3, 1e-2]},
        ...     seed=0)
        >>> pbt.set_search_properties(None, None, config={"lr": 1e-3})
        True
    """

    never_pauses = False
    #: The argument that names the config keys to explore, as error messages call it.
    _explored_arg = "hyperparam_mutations"

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: Sequence[float] = (1.2, 0.8),
        custom_explore_fn: Callable[[dict], dict] | None = None,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        owner = type(self).__name__
        self._perturbation_interval = check_number(owner, "perturbation_interval", perturbation_interval, gt=0)
        self._burn_in_period = check_number(owner, "burn_in_period", burn_in_period, ge=0)
        if hyperparam_mutations is None:
            hyperparam_mutations = {}
        if not isinstance(hyperparam_mutations, Mapping):
            raise arg_error(owner, "hyperparam_mutations", "a dict", hyperparam_mutations)
        self._check_mutations(hyperparam_mutations, "")
        if custom_explore_fn is not None and not callable(custom_explore_fn):
            raise arg_error(owner, "custom_explore_fn", "a callable or None", custom_explore_fn)
        if not hyperparam_mutations and custom_explore_fn is None:
            raise ValueError(f"{owner}: hyperparam_mutations or custom_explore_fn must be given")
        self._mutations = dict(hyperparam_mutations)
        self._quantile_fraction = check_number(owner, "quantile_fraction", quantile_fraction, ge=0, le=0.5)
        self._resample_probability = check_number(
            owner, "resample_probability", resample_probability, ge=0, le=1
        )
        if (
            isinstance(perturbation_factors, (str, bytes))
            or not isinstance(perturbation_factors, Sequence)
            or not perturbation_factors
            or not all(is_number(f) and math.isfinite(f) and f > 0 for f in perturbation_factors)
        ):
            raise arg_error(owner, "perturbation_factors", "a non-empty sequence of numbers > 0", perturbation_factors)
        self._perturbation_factors = tuple(perturbation_factors)
        self._custom_explore_fn = custom_explore_fn
        self._log_config = check_bool(owner, "log_config", log_config)
        self._require_attrs = check_bool(owner, "require_attrs", require_attrs)
        self._synch = check_bool(owner, "synch", synch)
        self._seed = check_seed(owner, seed)

        self._rng = random.Random(seed)
        self._states: dict[str, _TrialState] = {}
        self._next_perturbation_sync = max(perturbation_interval, burn_in_period)
        self._num_checkpoints = 0
        self._num_perturbations = 0
        self._exploits: list[dict[str, Any]] = []
        self._results_seen = 0  # counts results; orders waiting trials least recently run first
        self._last_seen: dict[str, int] = {}

    # -- argument checks ---------------------------------------------------------------------
    def _check_mutations(self, mutations: Mapping[str, Any], prefix: str) -> None:
        owner = type(self).__name__
        for key, value in mutations.items():
            field = f"hyperparam_mutations[{prefix}{key!r}]"
            if isinstance(value, Mapping):
                self._check_mutations(value, f"{prefix}{key!r}][")
            elif isinstance(value, (list, tuple)):
                if not value:
                    raise arg_error(owner, field, "a non-empty list", value)
            elif _is_domain(value):
                if type(value).__name__ == "Function":
                    raise arg_error(owner, field, "a list, a callable or a domain other than sample_from", value)
            elif not callable(value):
                raise arg_error(owner, field, "a list, a no-argument callable, a search-space domain or a dict", value)

    def _check_config(self, config: Mapping[str, Any], mutations: Mapping[str, Any], prefix: str = "") -> None:
        for key, value in mutations.items():
            if key not in config:
                raise ValueError(
                    f"{type(self).__name__}: {self._explored_arg} key {prefix + str(key)!r} is not in the "
                    f"config (config keys: {sorted(str(k) for k in config)})"
                )
            if isinstance(value, Mapping):
                if not isinstance(config[key], Mapping):
                    raise ValueError(
                        f"{type(self).__name__}: {self._explored_arg} key {prefix + str(key)!r} holds a dict "
                        f"but the config's value is {config[key]!r}"
                    )
                self._check_config(config[key], value, f"{prefix}{key}/")

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        config = spec.get("config")
        if isinstance(config, Mapping):
            self._check_config(config, self._mutations)
        return super().set_search_properties(metric, mode, **spec)

    # -- hooks -----------------------------------------------------------------------------------
    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._require_search_properties()
        self._check_config(trial.config, self._mutations)
        self._states.setdefault(trial.trial_id, _TrialState())

    def on_trial_result(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> str:
        if not self._require_attrs and not self._has_keys(result):
            return self.CONTINUE
        score = self._score(result)
        time = self._time(result)
        state = self._states.setdefault(trial.trial_id, _TrialState())
        self._results_seen += 1
        self._last_seen[trial.trial_id] = self._results_seen
        if time < self._burn_in_period:
            return self.CONTINUE
        if time - state.last_perturbation_time < self._perturbation_interval:
            return self.CONTINUE
        state.last_score, state.last_train_time = score, time
        self._on_perturbation_point(trial, time, score)
        trials = controller.get_trials()

        if not self._synch:
            state.last_perturbation_time = time
            lower, upper = self._quantiles(trials)
            waiting = any(t.status in (TrialStatus.PENDING, TrialStatus.PAUSED) for t in trials if t.trial_id != trial.trial_id)
            self._checkpoint_or_exploit(controller, trial, upper, lower, current=trial)
            return self.PAUSE if waiting else self.CONTINUE

        if not self._behind(trials, but=trial):  # the whole population is at the perturbation point
            self._synchronize(controller, trials, time, current=trial)
        return self.PAUSE

    def _behind(self, trials: Sequence[TrialLike], but: TrialLike | None = None) -> bool:
        """Whether a live trial (other than ``but``) has not reached the next sync point yet."""
        return any(
            t is not but
            and t.status not in ENDED
            and self._last_train_time(t) < self._next_perturbation_sync
            for t in trials
        )

    def _last_train_time(self, trial: TrialLike) -> float:
        state = self._states.get(trial.trial_id)
        return 0 if state is None else state.last_train_time

    def _synchronize(
        self, controller: ControllerLike, trials: Sequence[TrialLike], time: float, current: TrialLike | None
    ) -> None:
        """Synchronous PBT's step: rank the whole population, checkpoint the top, exploit it.

        ``current`` is the trial whose result is being decided (None when called from
        ``choose_trial_to_run``); every other live trial is paused (or being paused) there."""
        lower, upper = self._quantiles(trials)
        ids = {t.trial_id for t in lower + upper}
        middle = [
            t for t in trials
            if t.trial_id not in ids and t.trial_id in self._states and t.status not in ENDED
        ]
        for t in upper + middle + lower:  # donors are checkpointed before anyone exploits
            self._states[t.trial_id].last_perturbation_time = time
            self._checkpoint_or_exploit(controller, t, upper, lower, current)
        self._next_perturbation_sync = max(
            self._next_perturbation_sync + self._perturbation_interval,
            max(s.last_train_time for s in self._states.values()),
        )

    def _quantiles(self, trials: Sequence[TrialLike]) -> tuple[list[TrialLike], list[TrialLike]]:
        """(bottom, top) quantile of the live trials that have a score, worst first."""
        ranked = []
        scores: dict[str, float] = {}
        for t in trials:
            state = self._states.get(t.trial_id)
            if state is None or state.last_score is None or math.isnan(state.last_score):
                continue
            if t.status in ENDED:
                continue
            ranked.append(t)
            scores[t.trial_id] = state.last_score
        ranked.sort(key=lambda t: scores[t.trial_id])
        if len(ranked) <= 1:
            return [], []
        size = int(math.ceil(len(ranked) * self._quantile_fraction))
        if size > len(ranked) / 2:
            size = int(math.floor(len(ranked) / 2))
        return ranked[:size], ranked[len(ranked) - size :]

    def _checkpoint_or_exploit(
        self,
        controller: ControllerLike,
        trial: TrialLike,
        upper: list[TrialLike],
        lower: list[TrialLike],
        current: TrialLike | None,
    ) -> None:
        state = self._states[trial.trial_id]
        if trial.trial_id in {t.trial_id for t in upper}:
            if current is not None and trial.trial_id == current.trial_id:
                controller.checkpoint_trial(trial)
            # else: it is paused, or being paused, at this point: its pause checkpoint serves
            state.checkpointed = True
            self._num_checkpoints += 1
        else:
            state.checkpointed = False
        if trial.trial_id not in {t.trial_id for t in lower}:
            return
        donors = [t for t in upper if self._states[t.trial_id].checkpointed]
        if not donors:
            return
        donor = self._rng.choice(donors)
        donor_state = self._states[donor.trial_id]
        new_config = self._exploit_config(trial, donor)
        old_config = dict(trial.config)  # a controller may apply the new config at once
        if controller.exploit_trial(trial, donor, copy.deepcopy(new_config)) is False:
            return  # the donor had no checkpoint to give after all: this trial goes on as it is
        self._exploits.append(
            plain(
                {
                    "trial_id": trial.trial_id,
                    "donor_id": donor.trial_id,
                    "time": state.last_train_time,
                    "donor_time": donor_state.last_train_time,
                    "old_config": old_config,
                    "donor_config": dict(donor.config),
                    "new_config": new_config,
                }
            )
        )
        self._num_perturbations += 1
        if self._time_attr in getattr(controller, "exploit_keeps", ()):
            # The trial's clock goes on from its own time, not the donor's (see
            # ``ControllerLike.exploit_trial``): its next perturbation comes as many units after
            # this one as the donor's would have come after the donor's time, as in Ray Tune,
            # whose trial takes over the donor's clock.
            state.last_perturbation_time = state.last_train_time - (
                donor_state.last_train_time - donor_state.last_perturbation_time)
        else:
            state.last_perturbation_time = donor_state.last_perturbation_time
            state.last_train_time = donor_state.last_train_time
        self._on_exploit(trial, donor, new_config)

    # -- what a subclass changes (PB2) -----------------------------------------------------------
    def _on_perturbation_point(self, trial: TrialLike, time: float, score: float) -> None:
        """``trial`` reached a perturbation point with ``score``, before it is ranked."""

    def _exploit_config(self, trial: TrialLike, donor: TrialLike) -> dict[str, Any]:
        """The config ``trial`` gets when it exploits ``donor``: explored from the donor's."""
        return self.explore(donor.config)

    def _on_exploit(self, trial: TrialLike, donor: TrialLike, new_config: dict[str, Any]) -> None:
        """``trial`` now goes on from ``donor``'s checkpoint with ``new_config``."""

    # -- explore ---------------------------------------------------------------------------------
    def explore(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A new config explored from ``config``: ``hyperparam_mutations``, then ``custom_explore_fn``.

        Draws from the scheduler's seeded random state (so it advances it).
        """
        new_config = self._explore(config, self._mutations)
        if self._custom_explore_fn is not None:
            new_config = self._custom_explore_fn(new_config)
            if not isinstance(new_config, dict):
                raise ValueError(
                    f"{type(self).__name__}: custom_explore_fn must return the config dict, got {new_config!r}"
                )
        return new_config

    def _numpy_rng(self) -> np.random.Generator:
        return np.random.default_rng(self._rng.getrandbits(64))

    def _shift(self, values: Sequence[Any], current: Any) -> Any:
        """Ray Tune's list rule: resample, or move to a neighbouring entry (clipped at the ends)."""
        if self._rng.random() < self._resample_probability or current not in values:
            return self._rng.choice(list(values))
        shift = self._rng.choice([-1, 1])
        index = min(max(list(values).index(current) + shift, 0), len(values) - 1)
        return values[index]

    def _explore(self, config: Mapping[str, Any], mutations: Mapping[str, Any]) -> dict[str, Any]:
        new_config = copy.deepcopy(dict(config))
        for key, dist in mutations.items():
            current = config[key]
            if isinstance(dist, Mapping):
                new_config[key] = self._explore(current, dist)
                continue
            if isinstance(dist, (list, tuple)):
                new_config[key] = self._shift(dist, current)
                continue
            categories = getattr(dist, "categories", None) if _is_domain(dist) else None
            if categories is not None and not is_number(current):
                new_config[key] = self._shift(categories, current)
                continue
            if self._rng.random() < self._resample_probability:
                value = dist.sample(self._numpy_rng()) if _is_domain(dist) else dist()
            else:
                value = current * self._rng.choice(self._perturbation_factors)
                if _is_domain(dist):
                    value = self._clip(dist, value)
            if isinstance(current, bool):
                value = bool(value)
            elif isinstance(current, int):
                value = int(round(value))
            new_config[key] = value
        return new_config

    @staticmethod
    def _clip(domain: Any, value: Any) -> Any:
        low = getattr(domain, "low", None)
        low = getattr(domain, "lower", None) if low is None else low
        high = getattr(domain, "high", None)
        high = getattr(domain, "upper", None) if high is None else high
        if not is_number(value):
            return value
        if is_number(low) and value < low:
            value = low
        if is_number(high) and value > high:
            value = high
        return value

    # -- choosing ------------------------------------------------------------------------------
    def choose_trial_to_run(self, controller: ControllerLike) -> TrialLike | None:
        """The waiting trial that is furthest behind (in synch mode: not yet at the sync point).

        Ties go to the trial that reported least recently (Ray Tune: to the one added first).
        That keeps an exploiter, rewound to its donor's time, from running again before the
        donor does, which with deterministic trainables can repeat the same exploit forever.
        """
        trials = controller.get_trials()
        candidates = self._candidates(trials)
        if not candidates and self._synch:
            # Every live trial waits at the sync point, none runs: the ones still behind ended
            # instead of reaching it (a trial finished early, or failed). Sync without them.
            waiting = [t for t in trials if t.status == TrialStatus.PAUSED]
            if waiting and not self._behind(trials) and not any(t.status == TrialStatus.RUNNING for t in trials):
                self._synchronize(controller, trials, max(self._last_train_time(t) for t in waiting), None)
                candidates = self._candidates(trials)
        return candidates[0] if candidates else None

    def _candidates(self, trials: Sequence[TrialLike]) -> list[TrialLike]:
        candidates = []
        for t in trials:
            if t.status not in (TrialStatus.PENDING, TrialStatus.PAUSED):
                continue
            last = self._last_train_time(t)
            if self._synch and last >= self._next_perturbation_sync:
                continue
            candidates.append((last, self._last_seen.get(t.trial_id, 0), t))
        candidates.sort(key=lambda c: (c[0], c[1]))  # stable: then in order of addition
        return [c[2] for c in candidates]

    # -- introspection & state -----------------------------------------------------------------
    def exploit_log(self) -> list[dict[str, Any]]:
        """Every exploit so far: trial, donor, times, old/donor/new config."""
        return plain(self._exploits)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            trials={tid: s.to_state() for tid, s in self._states.items()},
            next_perturbation_sync=self._next_perturbation_sync,
            num_checkpoints=self._num_checkpoints,
            num_perturbations=self._num_perturbations,
            exploits=self._exploits,
            rng=rng_state_to_plain(self._rng.getstate()),
            results_seen=self._results_seen,
            last_seen=self._last_seen,
        )
        return plain(state)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._states = {tid: _TrialState.from_state(s) for tid, s in state["trials"].items()}
        self._next_perturbation_sync = state["next_perturbation_sync"]
        self._num_checkpoints = state["num_checkpoints"]
        self._num_perturbations = state["num_perturbations"]
        self._exploits = plain(state["exploits"])
        self._rng.setstate(rng_state_from_plain(state["rng"]))
        self._results_seen = state["results_seen"]
        self._last_seen = plain(state["last_seen"])

    def debug_string(self) -> str:
        return f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, {self._num_perturbations} perturbs"
