"""Optuna's samplers as a searcher (Ray Tune's ``OptunaSearch``), driven through ask/tell.

An in-memory Optuna study holds one Optuna trial per tuner trial. ``suggest`` asks it (points to
evaluate first), ``on_trial_result`` reports each intermediate value at its
``training_iteration``, ``on_trial_complete`` tells the outcome: COMPLETE with the last value of
the metric, FAIL for an errored trial, PRUNED for a trial a scheduler stopped
(``pruned=True``) or one that ended without reporting the metric. Pruned trials keep their
intermediate values, so TPE learns from trials that were stopped early too.

The search space is ours (``uniform``, ``loguniform``, ``randint``, ``choice``, ... in nested
dicts, with constants) and is translated into Optuna distributions named by the flattened key
(``"model/lr"``, see :mod:`.optuna_space`; the study is created, saved and restored by
:mod:`.optuna_study`); a dict of Optuna distributions, or a define-by-run function
``space(optuna_trial) -> dict | None``, work as in Ray Tune too::

    >>> from tuner.search.space import choice, loguniform
    >>> searcher = OptunaSearch(metric="loss", mode="min", seed=0)
    >>> searcher.set_search_properties(
    ...     None, None, {"model": {"lr": loguniform(1e-4, 1e-1)}, "act": choice(["relu", "tanh"]),
    ...                  "env": "CartPole-v1"})
    True
    >>> config = searcher.suggest("t0")
    >>> sorted(config), sorted(config["model"]), config["env"]
    (['act', 'env', 'model'], ['lr'], 'CartPole-v1')
    >>> searcher.on_trial_complete("t0", {"loss": 0.5, "training_iteration": 1})
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import TrialState

from schedulers.validation import is_int, is_number

from .optuna_space import (
    OptunaParam,
    contains_search_leaf,
    convert_space,
    encode_point,
    expand_flat_keys,
    values_equal,
)
from .optuna_study import (
    add_finished_trial,
    check_seed,
    new_study,
    restore_study,
    save_study,
    tell,
)
from .searcher import Searcher, validate_metric, validate_mode
from .variants import flatten_dict, resolve_config, unflatten_dict

__all__ = ["OptunaSearch"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1


def _deep_merge(base: dict, override: Mapping) -> dict:
    """``override`` on top of ``base`` (Ray's merge_dicts): nested dicts merge, others replace."""
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _deep_merge(base[k], v)
        else:
            base[k] = v
    return base


# --------------------------------------------------------------------------- argument checks


def _checked_sampler(sampler: Any) -> optuna.samplers.BaseSampler | None:
    if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
        raise ValueError(
            f"sampler must be an optuna sampler (optuna.samplers.BaseSampler), got "
            f"{type(sampler).__name__}"
        )
    return sampler


def _checked_points(points_to_evaluate: Any) -> list[dict]:
    """A copy of ``points_to_evaluate`` (None: no points), each point a dict."""
    if points_to_evaluate is None:
        points_to_evaluate = []
    if not isinstance(points_to_evaluate, (list, tuple)) or not all(
        isinstance(p, Mapping) for p in points_to_evaluate
    ):
        raise ValueError(
            f"points_to_evaluate must be a list of dicts, got {points_to_evaluate!r}"
        )
    return [dict(p) for p in points_to_evaluate]


def _checked_rewards(evaluated_rewards: Any, points: list[dict], space: Any) -> list[float] | None:
    """``evaluated_rewards`` as floats, one per point; only with a space whose distributions
    are known."""
    if evaluated_rewards is None:
        return None
    if not isinstance(evaluated_rewards, (list, tuple)) \
            or len(evaluated_rewards) != len(points):
        raise ValueError(
            "evaluated_rewards must be a list with one value per entry of "
            f"points_to_evaluate ({len(points)}), got {evaluated_rewards!r}"
        )
    for i, r in enumerate(evaluated_rewards):
        if not is_number(r) or math.isnan(r):
            raise ValueError(f"evaluated_rewards[{i}] must be a number, got {r!r}")
    if callable(space):
        raise ValueError(
            "evaluated_rewards cannot be used with a define-by-run function as space "
            "(the parameters' distributions are unknown)"
        )
    return [float(r) for r in evaluated_rewards]


def _checked_space(space: Any) -> dict | Callable | None:
    """The constructor's space, None when there is none (None or an empty dict)."""
    if isinstance(space, dict):
        return space or None
    if space is None or callable(space):
        return space
    raise ValueError(
        "space must be a dict (search space) or a define-by-run function, got "
        f"{type(space).__name__}"
    )


# --------------------------------------------------------------------------- the searcher


class OptunaSearch(Searcher):
    """Search with an Optuna sampler (TPE by default), as Ray Tune's ``OptunaSearch``.

    Args:
        space: the search space, when not given through ``tune.run(config=...)``: a dict of our
            domains (nested dicts, constants) and/or Optuna distributions, or a define-by-run
            function ``space(optuna_trial)`` that calls ``optuna_trial.suggest_*`` and returns
            None or a dict of constants to add to the config.
        metric, mode: the result key to optimize and ``"min"``/``"max"``; taken from
            ``tune.run`` when None.
        points_to_evaluate: configs (nested or with flattened ``"a/b"`` keys, possibly partial)
            to evaluate first, in order.
        sampler: any ``optuna.samplers.BaseSampler``; default ``TPESampler(seed=seed)``.
        seed: seed of the default sampler; ``tune.run``'s seed is used when None.
        evaluated_rewards: the metric value of each of ``points_to_evaluate``, already known:
            those points are added to the study as completed trials instead of being run.

    ``on_trial_complete(trial_id, result, error=False, pruned=False)``: ``pruned=True`` (a
    scheduler stopped the trial) records it as PRUNED with its intermediate values.
    """

    def __init__(
        self,
        space: dict | Callable[[optuna.trial.Trial], dict | None] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict] | None = None,
        sampler: optuna.samplers.BaseSampler | None = None,
        seed: int | None = None,
        evaluated_rewards: list[float] | None = None,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self._sampler = _checked_sampler(sampler)
        self._seed = check_seed(seed, "seed")
        if sampler is not None and seed is not None:
            logger.warning("OptunaSearch: a sampler was given, so seed=%r is not used; seed the "
                           "sampler itself", seed)
        self._points = _checked_points(points_to_evaluate)
        self._evaluated_rewards = _checked_rewards(evaluated_rewards, self._points, space)
        space = _checked_space(space)

        self._space_source: Any = None  # what the space was given as (dict or function)
        self._template: dict = {}  # the dict space with "a/b" keys expanded into nested dicts
        self._define_by_run: Callable | None = None
        self._params: list[OptunaParam] = []
        self._by_name: dict[str, OptunaParam] = {}
        self._constants: dict[str, Any] = {}
        self._encoded_points: list[dict[str, Any]] = []
        self._base_config: dict = {}  # tune.run constants when the space is our own

        self._study: optuna.Study | None = None
        self._live: dict[str, optuna.trial.Trial] = {}
        self._steps: dict[str, set[int]] = {}
        self._completed: set[str] = set()
        self._null_rng = np.random.default_rng(0)

        if space is not None:
            self._set_space(space)

    # ----------------------------------------------------------------- properties

    @property
    def study(self) -> optuna.Study | None:
        """The Optuna study (None until the first suggestion or restored state)."""
        return self._study

    @staticmethod
    def convert_search_space(spec: dict) -> dict[str, BaseDistribution]:
        """Our search space -> ``{flattened name: Optuna distribution}`` (Ray Tune's name).

        Categories that Optuna cannot hold as they are (dicts, lists, objects, duplicates) are
        given as their indices.
        """
        params, _ = convert_space(expand_flat_keys(spec))
        return {p.name: p.dist for p in params}

    # ----------------------------------------------------------------- Searcher API

    def own_space(self) -> dict[str, Any] | None:
        """The dict space it searches, "a/b" keys expanded into nested dicts; None before it has one
        and for a define-by-run function."""
        own = self._template or self._space_source
        return own if isinstance(own, dict) else None

    def defines_space_by_run(self) -> bool:
        return callable(self._space_source)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        """Take ``tune.run``'s metric, mode, search space and ``seed``.

        Returns False (changing nothing) when metric or mode conflict with the constructor's,
        or when a space was given to the constructor and ``config`` holds another search
        space. A ``config`` of constants only is merged under every suggestion (Ray Tune's
        merge of ``tune.run``'s config with the searcher's suggestions).
        """
        metric = validate_metric(metric)
        mode = validate_mode(mode)
        if self._metric is not None and metric is not None and metric != self._metric:
            return False
        if self._mode is not None and mode is not None and mode != self._mode:
            return False
        if config is None:
            config = {}
        if not isinstance(config, dict):
            raise ValueError(f"config must be a dict, got {type(config).__name__}")
        seed = check_seed(spec.get("seed"), "seed")

        base_config: dict | None = None
        new_space = False
        if self._space_source is not None:
            if config and config is not self._space_source and not values_equal(config,
                                                                            self._space_source):
                if contains_search_leaf(config):
                    return False  # Ray Tune: the searcher keeps the space it was built with
                base_config = config
        elif config:
            self._check_space(config)  # raise before changing anything
            new_space = True

        if not super().set_search_properties(metric, mode, config, **spec):
            return False
        if new_space:
            self._set_space(config)
        if base_config is not None:
            self._base_config = base_config
        if self._seed is None:
            self._seed = seed
        return True

    def suggest(self, trial_id: str) -> dict | None:
        """A new config from the sampler (``points_to_evaluate`` first)."""
        if self._space_source is None:
            raise RuntimeError(
                "OptunaSearch.suggest: no search space; pass space=... to OptunaSearch or a "
                "config with search domains to tune.run (set_search_properties)"
            )
        if self._metric is None or self._mode is None:
            raise RuntimeError(
                "OptunaSearch.suggest: metric and mode must be set; pass them to OptunaSearch "
                f"or tune.run (metric={self._metric!r}, mode={self._mode!r})"
            )
        if trial_id in self._live:
            raise ValueError(f"OptunaSearch.suggest: trial {trial_id!r} is already live")
        study = self._ensure_study()
        if self._define_by_run is not None:
            ot_trial = study.ask()
            try:
                extra = self._define_by_run(ot_trial)
            except Exception:
                study.tell(ot_trial, state=TrialState.FAIL)
                raise
            if extra is not None and (
                not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra)
            ):
                study.tell(ot_trial, state=TrialState.FAIL)
                raise ValueError(
                    "OptunaSearch: the define-by-run function (space) must return None or a "
                    f"dict with str keys, got {extra!r}"
                )
            config = unflatten_dict({**ot_trial.params, **(extra or {})})
        else:
            ot_trial = study.ask(fixed_distributions={p.name: p.dist for p in self._params})
            values = ot_trial.params
            assignment = {p.path: p.decode(values[p.name]) for p in self._params}
            config = resolve_config(self._template, assignment, self._null_rng)
        self._live[trial_id] = ot_trial
        self._steps[trial_id] = set()
        if self._base_config:
            config = _deep_merge(resolve_config(self._base_config, {}, self._null_rng), config)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """Report ``result[metric]`` at step ``result["training_iteration"]`` to the trial."""
        ot_trial = self._live.get(trial_id)
        if ot_trial is None or not result or self._metric not in result:
            return
        self._report(trial_id, ot_trial, result, self._steps.setdefault(trial_id, set()))

    def on_trial_complete(
        self,
        trial_id: str,
        result: dict | None = None,
        error: bool = False,
        pruned: bool = False,
        **kwargs: Any,
    ) -> None:
        """Tell the trial's outcome: FAIL when ``error``; PRUNED when ``pruned`` (a scheduler
        stopped it) or when ``result`` lacks the metric; else COMPLETE with ``result[metric]``.
        """
        ot_trial = self._live.pop(trial_id, None)
        steps = self._steps.pop(trial_id, None)
        if ot_trial is None:
            if trial_id in self._completed:
                logger.warning("OptunaSearch: trial %r was already completed; ignored", trial_id)
            else:
                logger.warning("OptunaSearch: on_trial_complete for unknown trial %r; ignored",
                               trial_id)
            return
        self._completed.add(trial_id)
        assert self._study is not None
        value = result.get(self._metric) if result else None
        if error:
            self._tell(ot_trial, None, TrialState.FAIL)
            return
        if pruned or value is None:
            if value is not None:  # the last result, if it was not reported yet
                assert result is not None  # value came from it
                self._report(trial_id, ot_trial, result, steps or set())
            self._tell(ot_trial, None, TrialState.PRUNED)
            return
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if math.isnan(number):
            logger.warning("OptunaSearch: trial %r ended with %s=%r, not a number; recorded as "
                           "FAIL", trial_id, self._metric, value)
            self._tell(ot_trial, None, TrialState.FAIL)
            return
        self._tell(ot_trial, number, TrialState.COMPLETE)

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float | None,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Add a config evaluated elsewhere to the study, as a finished trial (Ray Tune's API).

        ``parameters`` holds the values of some or all of the space's parameters (nested or
        flattened keys); ``intermediate_values[i]`` is the metric at iteration ``i + 1``.
        """
        if self._space_source is None:
            raise RuntimeError("OptunaSearch.add_evaluated_point: no search space set yet")
        if self._define_by_run is not None:
            raise ValueError("OptunaSearch.add_evaluated_point: not supported with a "
                             "define-by-run function as space")
        if self._mode is None:
            raise RuntimeError("OptunaSearch.add_evaluated_point: mode must be set first")
        params = self._encode_point(parameters, "add_evaluated_point")
        state = TrialState.FAIL if error else TrialState.PRUNED if pruned else TrialState.COMPLETE
        if state == TrialState.COMPLETE and (
            value is None or not is_number(value) or math.isnan(value)
        ):
            raise ValueError(f"add_evaluated_point: value must be a number, got {value!r}")
        self._add_finished_trial(params, value, state, intermediate_values)

    def state_dict(self) -> dict:
        """The study's trials, the sampler (pickled, with its RNG) and the live trials."""
        state = super().state_dict()
        state.update(
            version=_STATE_VERSION,
            seed=self._seed,
            study=None if self._study is None else save_study(self._study, self._mode),
            live={tid: t.number for tid, t in self._live.items()},
            completed=sorted(self._completed),
        )
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (before or after ``set_search_properties``)."""
        if not isinstance(state, dict) or "study" not in state or "live" not in state:
            raise ValueError(
                "state must be a dict from OptunaSearch.state_dict(), got "
                f"{type(state).__name__}"
            )
        super().load_state_dict(state)
        if self._seed is None and state.get("seed") is not None:
            self._seed = check_seed(state["seed"], "state['seed']")
        self._completed = set(state.get("completed", ()))
        self._live, self._steps = {}, {}
        study_state = state["study"]
        if study_state is None:
            self._study = None
            return
        study, by_number = restore_study(study_state, self._make_sampler)
        self._study = study
        for tid, number in state["live"].items():
            entry = by_number.get(number)
            if entry is None or entry[1].state != TrialState.RUNNING:
                logger.warning("OptunaSearch: live trial %r (Optuna trial %r) is not running in "
                               "the saved study; dropped", tid, number)
                continue
            self._live[tid] = optuna.trial.Trial(study, entry[0])
            self._steps[tid] = set(entry[1].intermediate_values)

    # ----------------------------------------------------------------- internals

    def _check_space(self, space: Any) -> None:
        if callable(space) and not isinstance(space, dict):
            return
        convert_space(expand_flat_keys(space))

    def _set_space(self, space: Any) -> None:
        if callable(space) and not isinstance(space, dict):
            self._define_by_run = space
            self._space_source = space
            self._encoded_points = [flatten_dict(p) for p in self._points]
            return
        params, constants = convert_space(expand_flat_keys(space))
        self._params = params
        self._by_name = {p.name: p for p in params}
        self._constants = constants
        self._space_source = space
        self._template = expand_flat_keys(space)
        self._encoded_points = [
            self._encode_point(p, f"points_to_evaluate[{i}]") for i, p in enumerate(self._points)
        ]

    def _encode_point(self, point: Mapping, where: str) -> dict[str, Any]:
        """A point (nested or flattened keys) -> ``{param name: Optuna value}``."""
        return encode_point(point, self._by_name, self._constants, where)

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        if self._sampler is not None:
            return self._sampler
        return optuna.samplers.TPESampler(seed=self._seed)

    def _ensure_study(self) -> optuna.Study:
        if self._study is not None:
            return self._study
        assert self._mode is not None
        study = self._study = new_study(self._make_sampler(), self._mode)
        if self._evaluated_rewards is not None:
            for params, reward in zip(self._encoded_points, self._evaluated_rewards):
                self._add_finished_trial(params, reward, TrialState.COMPLETE, None)
        else:
            for params in self._encoded_points:
                study.enqueue_trial(params)
        return study

    def _add_finished_trial(
        self, params: dict[str, Any], value: float | None, state: TrialState,
        intermediate_values: list[float] | None,
    ) -> None:
        add_finished_trial(self._ensure_study(), params,
                           {name: p.dist for name, p in self._by_name.items()}, value, state,
                           intermediate_values)

    def _report(self, trial_id: str, ot_trial: optuna.trial.Trial, result: Mapping,
                steps: set[int]) -> None:
        """Report ``result[metric]`` at its ``training_iteration`` unless reported already."""
        step = result.get("training_iteration")
        if step is None or not is_int(step) or step < 0:
            step = max(steps) + 1 if steps else 1
        step = int(step)
        if step in steps:
            return
        try:
            ot_trial.report(float(result[self._metric]), step)
        except (TypeError, ValueError) as exc:
            logger.warning("OptunaSearch: cannot report %s=%r of trial %r to Optuna: %s",
                           self._metric, result[self._metric], trial_id, exc)
            return
        steps.add(step)

    def _tell(self, ot_trial: optuna.trial.Trial, value: float | None,
              state: TrialState) -> None:
        assert self._study is not None
        tell(self._study, ot_trial, value, state)
