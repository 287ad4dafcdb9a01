"""Population Based Bandits (PB2, Parker-Holder et al. 2020), with Ray Tune's arguments and semantics.

PB2 is PBT (:class:`schedulers.pbt.PopulationBasedTraining`: the same perturbation points,
quantiles, checkpoints, exploits, ``synch`` mode, ``exploit_log`` and state) whose explore step
is a GP bandit instead of a random perturbation. Every perturbation point of a trial adds one row
to the population's data: ``(time, score at the start of the interval, hyperparameters)`` and, as
its label, the score's change per unit of ``time_attr`` over the interval. When a trial of the
bottom quantile exploits a donor, a GP is fitted to the latest rows and the new values of the
``hyperparam_bounds`` keys are those that maximise a UCB acquisition for a model that goes on
from the donor's (time, score); the donor's other config values are kept, then
``custom_explore_fn`` is applied.

The GP (:mod:`schedulers.pb2_bandit`, scikit-learn): time, score and hyperparameters are scaled
to [0, 1] (hyperparameters by their bounds), labels standardised and clipped to [-2, 2]. The
kernel is the paper's time-varying squared exponential of TV-GP-UCB (Bogunovic et al. 2016),
``variance * exp(-|x - x'|^2 / (2 l^2)) * (1 - epsilon)^(|t - t'| / 2)`` over (time; score and
hyperparameters), written as a scikit-learn ``Kernel`` with analytic gradients so that its three
hyperparameters are fitted by marginal likelihood like any built-in kernel's (scikit-learn has no
kernel on a subset of the input columns, which a product of built-in kernels would need), plus a
``WhiteKernel`` for the noise of RL returns. The acquisition is ``mean + sqrt(beta_t) * std``
with Ray Tune's ``beta_t = 0.2 + max(0, log(0.4 n))``; its variance counts the intervals being
run without a label yet (GP-BUCB), so trials exploiting at the same time spread out. Above 200
rows the window of latest rows is chosen by marginal likelihood (Ray Tune's ``select_length``).

Departures from Ray Tune's PB2, each where the paper or our PBT says otherwise:

- the UCB adds ``sqrt(beta_t)`` times the posterior *std* (the paper's GP-UCB); Ray Tune's adds
  the variance;
- the GP has a fitted white-noise term (Ray Tune's interpolates every label, alpha=1e-10);
- the new point is the donor's current (time, score), the state the new config trains from
  (Ray Tune's takes its last interval's start);
- a trial's data start at its first result (Ray Tune's at its first perturbation point, so its
  first exploits copy the donor's config unchanged); with no data at all the donor's config is
  kept, as in Ray Tune;
- the pending points are the exploited trials that have not reached their next perturbation
  point (Ray Tune's: the points chosen since the data's latest time);
- the acquisition is maximised from 256 seeded uniform draws, the best 3 refined by L-BFGS-B
  (Ray Tune's: 10 random starts of L-BFGS-B);
- a ``hyperparam_bounds`` key that is not in the config is an error (Ray Tune samples it), as is
  a bound with ``low >= high`` (Ray Tune allows ``low == high``); an int value stays an int
  (rounded; Ray Tune truncates);
- random draws come from ``seed``.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from schedulers._common import arg_error, plain
from schedulers.pbt import PopulationBasedTraining
from schedulers.trial_scheduler import ControllerLike, TrialLike
from schedulers.validation import is_number


def _check_bounds(owner: str, bounds: Any, prefix: str = "") -> list[tuple[tuple[str, ...], float, float]]:
    """``[(key path, low, high), ...]`` in the order of ``bounds``; one ValueError naming the bad entry."""
    field = f"hyperparam_bounds{prefix}"
    if not isinstance(bounds, Mapping) or not bounds:
        raise arg_error(owner, field, "a non-empty dict of {config key: [low, high]} (or of such dicts)", bounds)
    out: list[tuple[tuple[str, ...], float, float]] = []
    for key, value in bounds.items():
        if not isinstance(key, str):
            raise arg_error(owner, f"{field} key", "a string", key)
        if isinstance(value, Mapping):
            out += [((key, *path), low, high) for path, low, high in _check_bounds(owner, value, f"{prefix}[{key!r}]")]
            continue
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 2
            or not all(is_number(v, finite=True) for v in value)
            or not value[0] < value[1]
        ):
            raise arg_error(owner, f"{field}[{key!r}]", "[low, high] with finite numbers low < high", value)
        out.append(((key,), float(value[0]), float(value[1])))
    return out


def _get(config: Mapping[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        config = config[key]
    return config


def _set(config: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value


class PB2(PopulationBasedTraining):
    """Population Based Bandits; Ray Tune's ``PB2`` arguments (see the module docstring).

    Args:
        time_attr: The result key that measures progress (monotonically increasing).
        metric: The result key to optimize. Taken from ``tune.run`` when None.
        mode: 'min' or 'max'. Taken from ``tune.run`` when None.
        perturbation_interval: Perturb a trial every this much ``time_attr``.
        hyperparam_bounds: ``{config key: [low, high]}`` (or a dict of these for a nested
            config): the numeric hyperparameters the bandit chooses, within these bounds. Each key
            must be in every trial's config, holding a number.
        quantile_fraction: Fraction of the population in the top (donors) and in the bottom
            (exploiters) quantile, in [0, 0.5].
        log_config: Accepted for Ray Tune compatibility; the exploits are always kept in
            :meth:`exploit_log` and the controller records them in the store.
        require_attrs: Raise when a result lacks ``time_attr`` or ``metric``; when False such a
            result is ignored (CONTINUE).
        synch: Synchronous PB2 (perturb the whole population at once).
        custom_explore_fn: ``f(config) -> config`` applied after the bandit's choice.
        seed: Seed of every random draw (donor choice, the bandit's).

    Example:
        >>> from schedulers import PB2
        >>> pb2 = PB2(time_attr="training_iteration", metric="reward", mode="max",
        ...     perturbation_interval=5, hyperparam_bounds={"lr": [1e-4, 1e-2]}, seed=0)
        >>> pb2.set_search_properties(None, None, config={"lr": 1e-3})
        True
    """

    _explored_arg = "hyperparam_bounds"

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        hyperparam_bounds: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        custom_explore_fn: Callable[[dict], dict] | None = None,
        seed: int | None = None,
    ) -> None:
        owner = type(self).__name__
        bounds = _check_bounds(owner, hyperparam_bounds)
        assert isinstance(hyperparam_bounds, Mapping)  # _check_bounds raised otherwise
        super().__init__(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            perturbation_interval=perturbation_interval,
            hyperparam_mutations=copy.deepcopy(dict(hyperparam_bounds)),
            quantile_fraction=quantile_fraction,
            resample_probability=0.0,
            custom_explore_fn=custom_explore_fn,
            log_config=log_config,
            require_attrs=require_attrs,
            synch=synch,
            seed=seed,
        )
        self._paths = [path for path, _, _ in bounds]
        self._bounds = np.array([[low, high] for _, low, high in bounds], dtype=float)
        # One row per interval: [time at its end, score at its start, *values, score change / time].
        self._rows: list[list[float]] = []
        # Each trial's current interval so far: [time, score, *values] at its start.
        self._anchors: dict[str, list[float]] = {}
        # Intervals being run after an exploit, without a label yet: [time, score, *values].
        self._pending: dict[str, list[float]] = {}

    # -- config values -----------------------------------------------------------------------------
    def _values(self, config: Mapping[str, Any]) -> list[float]:
        """The ``hyperparam_bounds`` keys' values in ``config``, in order."""
        values = []
        for path in self._paths:
            value = _get(config, path)
            if not is_number(value, finite=True):
                raise ValueError(
                    f"{type(self).__name__}: hyperparam_bounds key {'/'.join(path)!r} must hold a finite "
                    f"number in the config, got {value!r}"
                )
            values.append(float(value))
        return values

    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        super().on_trial_add(controller, trial)
        self._values(trial.config)

    # -- the data ----------------------------------------------------------------------------------
    def on_trial_result(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> str:
        if trial.trial_id not in self._anchors and self._has_keys(result):
            # The trial's first interval starts at its first result.
            self._anchors[trial.trial_id] = [self._time(result), self._score(result), *self._values(trial.config)]
        return super().on_trial_result(controller, trial, result)

    def _on_perturbation_point(self, trial: TrialLike, time: float, score: float) -> None:
        values = self._values(trial.config)
        anchor = self._anchors.get(trial.trial_id)
        if anchor is not None and anchor[2:] == values and time > anchor[0]:
            change = (score - anchor[1]) / (time - anchor[0])
            if math.isfinite(change):  # a NaN score (no episode yet) gives no row
                self._rows.append([float(time), anchor[1], *values, float(change)])
        self._anchors[trial.trial_id] = [float(time), float(score), *values]
        self._pending.pop(trial.trial_id, None)  # its interval got its label

    def _on_exploit(self, trial: TrialLike, donor: TrialLike, new_config: dict[str, Any]) -> None:
        donor_state = self._states[donor.trial_id]
        assert donor_state.last_score is not None  # a donor was ranked by its score
        start = [float(donor_state.last_train_time), float(donor_state.last_score), *self._values(new_config)]
        self._anchors[trial.trial_id] = start
        self._pending[trial.trial_id] = list(start)

    def on_trial_complete(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any] | None
    ) -> None:
        self._forget(trial)
        super().on_trial_complete(controller, trial, result)

    def on_trial_remove(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._forget(trial)
        super().on_trial_remove(controller, trial)

    def _forget(self, trial: TrialLike) -> None:
        """An ended trial's interval will never get its label."""
        self._anchors.pop(trial.trial_id, None)
        self._pending.pop(trial.trial_id, None)

    # -- explore -----------------------------------------------------------------------------------
    def explore(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Not PB2's: its explore step needs the population's data and the donor (see :meth:`suggest`)."""
        raise NotImplementedError(
            f"{type(self).__name__} explores at an exploit, from the population's data: use suggest(donor_id)"
        )

    def suggest(self, donor_id: str, exclude: str | None = None) -> dict[str, float] | None:
        """The bandit's values for a model that goes on from trial ``donor_id``'s last
        perturbation point (``{'key/path': value}``), or None while there are no data.

        ``exclude``: a trial whose pending interval is left out (the one about to exploit).
        Draws from the scheduler's seeded random state (so it advances it).
        """
        if not self._rows:
            return None
        from schedulers import pb2_bandit  # scikit-learn loads in a second or two: only when needed

        donor = self._states[donor_id]
        assert donor.last_score is not None  # a donor was ranked by its score
        rows = np.array(self._rows, dtype=float)
        pending = [p for tid, p in self._pending.items() if tid != exclude]
        d = len(self._paths)
        values = pb2_bandit.suggest(
            rows[:, :-1],
            rows[:, -1],
            np.array([donor.last_train_time, donor.last_score], dtype=float),
            np.array(pending, dtype=float).reshape(len(pending), 2 + d),
            self._bounds,
            self._numpy_rng(),
        )
        return {"/".join(path): float(v) for path, v in zip(self._paths, values)}

    def _exploit_config(self, trial: TrialLike, donor: TrialLike) -> dict[str, Any]:
        new_config = copy.deepcopy(dict(donor.config))
        chosen = self.suggest(donor.trial_id, exclude=trial.trial_id)
        if chosen is not None:
            for path, (low, high) in zip(self._paths, self._bounds):
                value = min(max(chosen["/".join(path)], float(low)), float(high))
                old = _get(new_config, path)
                _set(new_config, path, int(round(value)) if isinstance(old, int) else value)
        if self._custom_explore_fn is not None:
            new_config = self._custom_explore_fn(new_config)
            if not isinstance(new_config, dict):
                raise ValueError(
                    f"{type(self).__name__}: custom_explore_fn must return the config dict, got {new_config!r}"
                )
        return new_config

    # -- introspection & state -----------------------------------------------------------------------
    def data(self) -> list[dict[str, float]]:
        """The bandit's data so far: one dict per interval (time at its end, score at its start,
        the hyperparameters, and ``change``: the score's change per unit of time)."""
        names = ["/".join(p) for p in self._paths]
        return [
            {"time": r[0], "score_before": r[1], **dict(zip(names, r[2:-1])), "change": r[-1]} for r in self._rows
        ]

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(pb2_rows=self._rows, pb2_anchors=self._anchors, pb2_pending=self._pending)
        return plain(state)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._rows = plain(state["pb2_rows"])
        self._anchors = plain(state["pb2_anchors"])
        self._pending = plain(state["pb2_pending"])

    def debug_string(self) -> str:
        return (
            f"PB2: {self._num_checkpoints} checkpoints, {self._num_perturbations} perturbs, "
            f"{len(self._rows)} data rows"
        )
