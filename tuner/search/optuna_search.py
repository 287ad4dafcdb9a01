"""Optuna's samplers as a searcher (Ray Tune's ``OptunaSearch``), driven through ask/tell.

An in-memory Optuna study holds one Optuna trial per tuner trial. ``suggest`` asks it (points to
evaluate first), ``on_trial_result`` reports each intermediate value at its
``training_iteration``, ``on_trial_complete`` tells the outcome: COMPLETE with the last value of
the metric, FAIL for an errored trial, PRUNED for a trial a scheduler stopped
(``pruned=True``) or one that ended without reporting the metric. Pruned trials keep their
intermediate values, so TPE learns from trials that were stopped early too.

The search space is ours (``uniform``, ``loguniform``, ``randint``, ``choice``, ... in nested
dicts, with constants) and is translated into Optuna distributions named by the flattened key
(``"model/lr"``); a dict of Optuna distributions, or a define-by-run function
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

import contextlib
import logging
import math
import numbers
import pickle
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from .searcher import Searcher, validate_metric, validate_mode
from .space import (
    Categorical,
    Domain,
    Float,
    Function,
    Integer,
    Normal,
    _quantize_float,
    _quantized_range,
    is_grid_search,
)
from .variants import Path, flatten_dict, path_str, resolve_config, unflatten_dict

__all__ = ["OptunaSearch"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1
_MAX_SEED = 2**32 - 1  # numpy's RandomState (used by Optuna's samplers) takes seeds below 2**32


# --------------------------------------------------------------------------- space translation


class _Param:
    """One Optuna parameter: its flattened name, path in the config, distribution and codec."""

    def __init__(
        self, name: str, path: Path, dist: BaseDistribution, domain: Domain | None = None,
        index_choices: list | None = None, quantize: Callable[[Any], Any] | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.dist = dist
        self.domain = domain
        self.index_choices = index_choices  # categories Optuna sees as indices 0..n-1
        self._quantize = quantize

    def decode(self, value: Any) -> Any:
        """Optuna's value -> the config's value."""
        if self.index_choices is not None:
            return self.index_choices[int(value)]
        if isinstance(self.domain, Integer):
            value = int(value)
        elif isinstance(self.domain, Float):
            value = float(value)
            if self.domain.q is None and value == self.domain.upper:
                value = math.nextafter(value, -math.inf)  # our uniform excludes upper
        if self._quantize is not None:
            value = self._quantize(value)
        return value

    def encode(self, value: Any, where: str) -> Any:
        """A user-given value (points_to_evaluate) -> Optuna's value; checked against the domain."""
        if self.index_choices is not None:
            index = _index_of(self.index_choices, value)
            if index is None:
                raise ValueError(
                    f"{where}: value {value!r} of {self.name!r} is not one of the choices "
                    f"{self.index_choices!r}"
                )
            return index
        if isinstance(self.dist, CategoricalDistribution):
            if _index_of(list(self.dist.choices), value) is None:
                raise ValueError(
                    f"{where}: value {value!r} of {self.name!r} is not one of the choices "
                    f"{list(self.dist.choices)!r}"
                )
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{where}: value of {self.name!r} must be a number, got {value!r}")
        value = value.item() if isinstance(value, np.generic) else value
        valid = self.domain.is_valid(value) if self.domain is not None else \
            self.dist._contains(self.dist.to_internal_repr(value))
        if not valid:
            logger.warning("%s: value %r of %r is outside %r", where, value, self.name,
                           self.domain if self.domain is not None else self.dist)
        return value


def _index_of(choices: list, value: Any) -> int | None:
    """Index of ``value`` in ``choices``: identity first, then same type and equal, then equal."""
    for i, c in enumerate(choices):
        if c is value:
            return i
    for same_type in (True, False):
        for i, c in enumerate(choices):
            if same_type and type(c) is not type(value):
                continue
            try:
                if bool(c == value):
                    return i
            except Exception:  # noqa: BLE001 - e.g. numpy arrays: ambiguous truth value
                continue
    return None


def _primitive_choices(categories: list) -> bool:
    """Whether Optuna can hold ``categories`` as they are (unique None/bool/int/float/str)."""
    for c in categories:
        if c is not None and type(c) not in (bool, int, float, str):
            return False
        if isinstance(c, float) and math.isnan(c):
            return False
    for i, c in enumerate(categories):  # 1, 1.0 and True are one choice to Optuna
        if any(c == categories[j] for j in range(i)):
            return False
    return True


def _contains_search_leaf(node: Any) -> bool:
    if isinstance(node, (Domain, BaseDistribution)) or is_grid_search(node):
        return True
    if isinstance(node, Mapping):
        return any(_contains_search_leaf(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(_contains_search_leaf(v) for v in node)
    return False


def _leaves(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every leaf of a space: Domains, Optuna distributions, grid axes and constants."""
    if isinstance(node, (Domain, BaseDistribution)) or is_grid_search(node):
        yield path, node
    elif isinstance(node, Mapping) and node:
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, (list, tuple)) and node:
        for i, v in enumerate(node):
            yield from _leaves(v, path + (i,))
    else:
        yield path, node


def _translate(name: str, path: Path, domain: Any) -> _Param:
    """One of our domains (or an Optuna distribution) -> a :class:`_Param`."""
    if isinstance(domain, BaseDistribution):
        return _Param(name, path, domain)
    if is_grid_search(domain):
        raise ValueError(
            f"OptunaSearch: grid_search at {name!r} is not supported: grid search is only for "
            "BasicVariantGenerator (use choice(...) to let Optuna pick among the values)"
        )
    if isinstance(domain, Function):
        raise ValueError(
            f"OptunaSearch: sample_from at {name!r} is not supported (Optuna cannot model an "
            "arbitrary function); give OptunaSearch a define-by-run function as `space` instead"
        )
    if isinstance(domain, Normal):
        raise ValueError(
            f"OptunaSearch: {domain!r} at {name!r} is not supported: Optuna has no normal "
            "distribution; use uniform/loguniform bounds instead"
        )
    if isinstance(domain, Float):
        lower, upper, q = float(domain.lower), float(domain.upper), domain.q
        if q is None:
            return _Param(name, path, FloatDistribution(lower, upper, log=domain.log), domain)
        step = float(q)
        lo_k, hi_k = _quantized_range(domain.function_name, domain.lower, domain.upper, step)

        def quantize(x: float) -> float:
            return _quantize_float(x, step, lo_k, hi_k)

        if domain.log:  # Optuna has no step with log=True: sample log-uniformly, then round
            return _Param(name, path, FloatDistribution(lower, upper, log=True), domain,
                          quantize=quantize)
        low, high = quantize(lo_k * step), quantize(hi_k * step)
        return _Param(name, path, FloatDistribution(low, high, step=step), domain,
                      quantize=quantize)
    if isinstance(domain, Integer):
        low, high, q = domain.low, domain.high, domain.q
        if q is not None and q > 1 and domain.log:  # Optuna has no step with log=True

            def quantize_int(x: int) -> int:
                return int(min(max(round(x / q) * q, low), high))

            return _Param(name, path, IntDistribution(low, high, log=True), domain,
                          quantize=quantize_int)
        return _Param(name, path, IntDistribution(low, high, log=domain.log, step=q or 1), domain)
    if isinstance(domain, Categorical):
        categories = list(domain.categories)
        if any(_contains_search_leaf(c) for c in categories):
            raise ValueError(
                f"OptunaSearch: choice at {name!r} has search-space domains inside its "
                "categories (a conditional space); OptunaSearch supports that only through a "
                "define-by-run function as `space`"
            )
        if _primitive_choices(categories):
            return _Param(name, path, CategoricalDistribution(categories), domain)
        return _Param(name, path, CategoricalDistribution(list(range(len(categories)))), domain,
                      index_choices=categories)
    raise ValueError(f"OptunaSearch: {name!r} has an unsupported domain {domain!r}")


def _expand_flat_keys(node: Any, path: Path = ()) -> Any:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}`` at any depth (Ray's flattened keys); search leaves
    and non-dict values are kept as they are."""
    if not isinstance(node, dict) or is_grid_search(node):
        return node
    out: dict = {}
    for key, value in node.items():
        parts = key.split("/") if isinstance(key, str) and "/" in key else [key]
        if any(p == "" for p in parts):
            parts = [key]
        target = out
        for depth, part in enumerate(parts[:-1]):
            child = target.setdefault(part, {})
            if not isinstance(child, dict) or is_grid_search(child):
                raise ValueError(f"OptunaSearch: key {path_str(path + (key,))!r} collides with "
                                 f"{path_str(path + tuple(parts[:depth + 1]))!r}")
            target = child
        leaf = parts[-1]
        value = _expand_flat_keys(value, path + tuple(parts))
        if leaf in target:
            if isinstance(target[leaf], dict) and isinstance(value, dict) \
                    and not is_grid_search(value) and not is_grid_search(target[leaf]):
                for k, v in value.items():
                    if k in target[leaf]:
                        raise ValueError("OptunaSearch: two keys of the search space name "
                                         f"{path_str(path + tuple(parts) + (k,))!r}")
                    target[leaf][k] = v
                continue
            raise ValueError(
                f"OptunaSearch: two keys of the search space name {path_str(path + tuple(parts))!r}"
            )
        target[leaf] = value
    return out


def _convert_space(space: dict) -> tuple[list[_Param], dict[str, Any]]:
    """``(params, constants)`` of a (possibly nested) space; constants keyed by flat name.

    ``space`` must have gone through :func:`_expand_flat_keys`.
    """
    if not isinstance(space, dict):
        raise ValueError(f"space must be a dict, got {type(space).__name__}")
    params: list[_Param] = []
    constants: dict[str, Any] = {}
    seen: set[str] = set()
    for path, leaf in _leaves(space):
        if not path:
            continue  # an empty space
        name = path_str(path)
        if name in seen:
            raise ValueError(
                f"OptunaSearch: two keys of the search space flatten to the same name {name!r}"
            )
        seen.add(name)
        if isinstance(leaf, (Domain, BaseDistribution)) or is_grid_search(leaf):
            params.append(_translate(name, path, leaf))
        else:
            constants[name] = leaf
    return params, constants


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. numpy arrays among the constants
        return False


def _deep_merge(base: dict, override: Mapping) -> dict:
    """``override`` on top of ``base`` (Ray's merge_dicts): nested dicts merge, others replace."""
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _deep_merge(base[k], v)
        else:
            base[k] = v
    return base


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Hide Optuna's INFO lines ("A new study created in memory ...") for one call."""
    level = optuna.logging.get_verbosity()
    if level >= optuna.logging.WARNING:
        yield
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


def _check_seed(seed: Any, field: str) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not 0 <= int(seed) <= _MAX_SEED:
        raise ValueError(f"{field} must be an integer in [0, 2**32 - 1] or None, got {seed!r}")
    return int(seed)


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
        if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
            raise ValueError(
                f"sampler must be an optuna sampler (optuna.samplers.BaseSampler), got "
                f"{type(sampler).__name__}"
            )
        self._seed = _check_seed(seed, "seed")
        if sampler is not None and seed is not None:
            logger.warning("OptunaSearch: a sampler was given, so seed=%r is not used; seed the "
                           "sampler itself", seed)
        if points_to_evaluate is None:
            points_to_evaluate = []
        if not isinstance(points_to_evaluate, (list, tuple)) or not all(
            isinstance(p, Mapping) for p in points_to_evaluate
        ):
            raise ValueError(
                f"points_to_evaluate must be a list of dicts, got {points_to_evaluate!r}"
            )
        if evaluated_rewards is not None:
            if not isinstance(evaluated_rewards, (list, tuple)) \
                    or len(evaluated_rewards) != len(points_to_evaluate):
                raise ValueError(
                    "evaluated_rewards must be a list with one value per entry of "
                    f"points_to_evaluate ({len(points_to_evaluate)}), got {evaluated_rewards!r}"
                )
            for i, r in enumerate(evaluated_rewards):
                if isinstance(r, bool) or not isinstance(r, numbers.Real) or math.isnan(r):
                    raise ValueError(f"evaluated_rewards[{i}] must be a number, got {r!r}")
            if callable(space):
                raise ValueError(
                    "evaluated_rewards cannot be used with a define-by-run function as space "
                    "(the parameters' distributions are unknown)"
                )
        self._points = [dict(p) for p in points_to_evaluate]
        self._evaluated_rewards = None if evaluated_rewards is None \
            else [float(r) for r in evaluated_rewards]
        self._sampler = sampler

        self._space_source: Any = None  # what the space was given as (dict or function)
        self._template: dict = {}  # the dict space with "a/b" keys expanded into nested dicts
        self._define_by_run: Callable | None = None
        self._params: list[_Param] = []
        self._by_name: dict[str, _Param] = {}
        self._constants: dict[str, Any] = {}
        self._encoded_points: list[dict[str, Any]] = []
        self._base_config: dict = {}  # tune.run constants when the space is our own

        self._study: optuna.Study | None = None
        self._live: dict[str, optuna.trial.Trial] = {}
        self._steps: dict[str, set[int]] = {}
        self._completed: set[str] = set()
        self._null_rng = np.random.default_rng(0)

        if space is not None:
            if isinstance(space, dict):
                if space:
                    self._set_space(space)
            elif callable(space):
                self._set_space(space)
            else:
                raise ValueError(
                    "space must be a dict (search space) or a define-by-run function, got "
                    f"{type(space).__name__}"
                )

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
        params, _ = _convert_space(_expand_flat_keys(spec))
        return {p.name: p.dist for p in params}

    # ----------------------------------------------------------------- Searcher API

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
        seed = _check_seed(spec.get("seed"), "seed")

        base_config: dict | None = None
        new_space = False
        if self._space_source is not None:
            if config and config is not self._space_source and not _equal(config,
                                                                            self._space_source):
                if _contains_search_leaf(config):
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
            value is None or isinstance(value, bool) or not isinstance(value, numbers.Real)
            or math.isnan(value)
        ):
            raise ValueError(f"add_evaluated_point: value must be a number, got {value!r}")
        self._add_finished_trial(params, value, state, intermediate_values)

    def state_dict(self) -> dict:
        """The study's trials, the sampler (pickled, with its RNG) and the live trials."""
        state = super().state_dict()
        study_state = None
        if self._study is not None:
            study = self._study
            try:
                sampler_blob: bytes | None = pickle.dumps(study.sampler)
            except Exception as exc:  # noqa: BLE001 - a user sampler holding something unpicklable
                logger.warning("OptunaSearch: cannot pickle the sampler (%s); a resumed search "
                               "starts a fresh one", exc)
                sampler_blob = None
            study_state = {
                "direction": "minimize" if self._mode == "min" else "maximize",
                "sampler": sampler_blob,
                # No deep copy needed (it costs ~0.1 s for 500 trials x 200 results): the
                # in-memory storage replaces a trial object on every update, never mutates it.
                "trials": study.get_trials(deepcopy=False),
                "user_attrs": dict(study.user_attrs),
                "system_attrs": dict(study._storage.get_study_system_attrs(study._study_id)),
            }
        state.update(
            version=_STATE_VERSION,
            seed=self._seed,
            study=study_state,
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
            self._seed = _check_seed(state["seed"], "state['seed']")
        self._completed = set(state.get("completed", ()))
        self._live, self._steps = {}, {}
        study_state = state["study"]
        if study_state is None:
            self._study = None
            return
        sampler = None
        if study_state.get("sampler") is not None:
            sampler = pickle.loads(study_state["sampler"])
        if sampler is None:
            sampler = self._make_sampler()
        with _quiet_optuna():
            study = optuna.create_study(sampler=sampler, direction=study_state["direction"])
        storage, study_id = study._storage, study._study_id
        for key, value in study_state.get("system_attrs", {}).items():
            storage.set_study_system_attr(study_id, key, value)
        for key, value in study_state.get("user_attrs", {}).items():
            study.set_user_attr(key, value)
        by_number: dict[int, Any] = {}
        for frozen in study_state["trials"]:
            # Straight into storage: add_trial would re-validate (e.g. reject an out-of-range
            # point a running trial was fixed to), and the trial numbers must stay the same.
            trial_id = storage.create_new_trial(study_id, template_trial=frozen)
            by_number[storage.get_trial_number_from_id(trial_id)] = (trial_id, frozen)
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
        _convert_space(_expand_flat_keys(space))

    def _set_space(self, space: Any) -> None:
        if callable(space) and not isinstance(space, dict):
            self._define_by_run = space
            self._space_source = space
            self._encoded_points = [flatten_dict(p) for p in self._points]
            return
        params, constants = _convert_space(_expand_flat_keys(space))
        self._params = params
        self._by_name = {p.name: p for p in params}
        self._constants = constants
        self._space_source = space
        self._template = _expand_flat_keys(space)
        self._encoded_points = [
            self._encode_point(p, f"points_to_evaluate[{i}]") for i, p in enumerate(self._points)
        ]

    def _encode_point(self, point: Mapping, where: str) -> dict[str, Any]:
        """A point (nested or flattened keys) -> ``{param name: Optuna value}``."""
        if not isinstance(point, Mapping):
            raise ValueError(f"{where} must be a dict, got {point!r}")
        out: dict[str, Any] = {}
        names = set(self._by_name) | set(self._constants)

        def walk(node: Any, name: str) -> None:
            if name in self._by_name:
                if name in out:
                    raise ValueError(f"{where}: {name!r} is given twice")
                out[name] = self._by_name[name].encode(node, where)
                return
            if name in self._constants:
                constant = self._constants[name]
                if not _equal(constant, node):
                    raise ValueError(
                        f"{where}: {name!r} is a constant ({constant!r}) of the search space, "
                        f"not a searchable parameter; got {node!r}"
                    )
                return
            prefix = f"{name}/" if name else ""
            is_prefix = any(n.startswith(prefix) for n in names)
            if is_prefix and isinstance(node, Mapping):
                for k, v in node.items():
                    walk(v, f"{prefix}{k}")
                return
            if is_prefix and isinstance(node, (list, tuple)):
                for i, v in enumerate(node):
                    walk(v, f"{prefix}{i}")
                return
            raise ValueError(
                f"{where}: key {name!r} is not in the search space (parameters: "
                f"{sorted(self._by_name)})"
            )

        walk(point, "")
        return out

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        if self._sampler is not None:
            return self._sampler
        return optuna.samplers.TPESampler(seed=self._seed)

    def _ensure_study(self) -> optuna.Study:
        if self._study is not None:
            return self._study
        assert self._mode is not None
        with _quiet_optuna():
            study = optuna.create_study(
                sampler=self._make_sampler(),
                direction="minimize" if self._mode == "min" else "maximize",
            )
        self._study = study
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
        study = self._ensure_study()
        trial = optuna.trial.create_trial(
            params=params,
            distributions={name: self._by_name[name].dist for name in params},
            value=None if state != TrialState.COMPLETE else float(value),  # type: ignore[arg-type]
            state=state,
            intermediate_values=None if not intermediate_values
            else {i + 1: float(v) for i, v in enumerate(intermediate_values)},
        )
        study.add_trial(trial)

    def _report(self, trial_id: str, ot_trial: optuna.trial.Trial, result: Mapping,
                steps: set[int]) -> None:
        """Report ``result[metric]`` at its ``training_iteration`` unless reported already."""
        step = result.get("training_iteration")
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
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
        try:
            self._study.tell(ot_trial, value, state=state)
        except Exception as exc:  # noqa: BLE001 - never let bookkeeping in Optuna break the sweep
            logger.warning("OptunaSearch: could not tell Optuna trial %d: %s", ot_trial.number,
                           exc)
