"""The default searcher: grid search times random sampling, as Ray Tune's BasicVariantGenerator."""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from schedulers.validation import is_int, is_seed

from .searcher import Searcher
from .space import Domain, Function, is_grid_search
from .variants import (
    Path,
    count_grid_points,
    grid_assignment_at,
    grid_axes,
    iter_domains,
    path_str,
    resolve_config,
    sample_domain,
)

__all__ = ["BasicVariantGenerator"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1
_MISSING = object()


class BasicVariantGenerator(Searcher):
    """Grid x random search over a config (the default searcher).

    The trials, in order:

    1. one per entry of ``points_to_evaluate``: the point's keys are fixed (nested dicts or
       flattened ``"a/b"`` keys), every other Domain is sampled, and a grid axis the point does
       not fix gets one of its values drawn at random;
    2. then ``for sample in range(num_samples): for variant in grid variants:`` one config with
       that grid combination and fresh samples of every Domain (grid order: see
       :mod:`tuner.search.variants`). With ``constant_grid_search=True`` the Domains are sampled
       once per sample and kept across its grid variants (``sample_from`` still runs per config).

    So ``total_trials == len(points_to_evaluate) + num_samples * count_grid_points(config)``;
    ``num_samples=0`` with points runs exactly the points (with ``config={}``, each point is a
    whole config: keys one point has and another lacks stay out of the other).

    The same seed gives the same sequence of configs; ``random_state`` (constructor) wins over
    the ``seed`` passed to ``set_search_properties``; both None means a random seed.
    ``max_concurrent > 0`` makes ``suggest`` return None while that many trials are live.

    >>> from tuner.search.space import grid_search, uniform
    >>> gen = BasicVariantGenerator(random_state=0)
    >>> gen.set_search_properties(None, None, {"a": grid_search([1, 2]), "x": uniform(0, 1)},
    ...                           num_samples=2)
    True
    >>> gen.total_trials
    4
    >>> [gen.suggest(str(i))["a"] for i in range(4)], gen.suggest("4")
    ([1, 2, 1, 2], 'FINISHED')
    """

    def __init__(
        self,
        points_to_evaluate: list[dict] | None = None,
        max_concurrent: int = 0,
        random_state: int | np.random.Generator | None = None,
        constant_grid_search: bool = False,
    ) -> None:
        super().__init__()
        if points_to_evaluate is None:
            points_to_evaluate = []
        if not isinstance(points_to_evaluate, (list, tuple)) or not all(
            isinstance(p, Mapping) for p in points_to_evaluate
        ):
            raise ValueError(
                f"points_to_evaluate must be a list of dicts, got {points_to_evaluate!r}"
            )
        if not is_int(max_concurrent) or max_concurrent < 0:
            raise ValueError(
                f"max_concurrent must be an integer >= 0 (0: no limit), got {max_concurrent!r}"
            )
        _check_seed(random_state, "random_state", allow_generator=True)
        self._points = [dict(p) for p in points_to_evaluate]
        self._max_concurrent = int(max_concurrent)
        self._random_state = random_state
        self._constant_grid_search = bool(constant_grid_search)

        self._space: dict | None = None
        self._num_samples = 1
        self._axes: list[tuple[Path, list]] = []
        self._grid_points = 1
        self._point_assignments: list[dict[Path, Any]] = []
        self._point_free_axes: list[list[tuple[Path, list]]] = []
        self._constant_paths: list[Path] = []
        self._rng: np.random.Generator | None = None
        self._position = 0
        self._constants: dict[Path, Any] | None = None
        self._live: list[str] = []
        self._pending_state: dict | None = None

    # ----------------------------------------------------------------- properties

    @property
    def total_trials(self) -> int:
        """How many configs this generator gives out in all (0 before the space is set)."""
        if self._space is None:
            return 0
        return len(self._points) + self._num_samples * self._grid_points

    @property
    def num_suggested(self) -> int:
        """How many configs were given out so far."""
        return self._position

    @property
    def is_finished(self) -> bool:
        return self._space is not None and self._position >= self.total_trials

    # ----------------------------------------------------------------- Searcher API

    def set_search_properties(
        self,
        metric: str | None,
        mode: str | None,
        config: dict,
        num_samples: int = 1,
        seed: int | None = None,
        **spec: Any,
    ) -> bool:
        """Set the search space; False (nothing changed) if one was set already, or if metric or
        mode conflict with the ones given to the constructor."""
        if self._space is not None:
            return False
        if not isinstance(config, dict):
            raise ValueError(f"config must be a dict, got {type(config).__name__}")
        if not is_int(num_samples) or num_samples < (0 if self._points else 1):
            raise ValueError(f"num_samples must be an integer >= 1 (or 0 with points_to_evaluate: the points "
                             f"only), got {num_samples!r}")
        _check_seed(seed, "seed", allow_generator=False)
        axes = grid_axes(config)  # validates every grid axis
        domains = iter_domains(config)
        point_assignments = [
            _point_assignment(config, point, i) for i, point in enumerate(self._points)
        ]
        if not super().set_search_properties(metric, mode, config, **spec):
            return False

        self._space = config
        self._num_samples = int(num_samples)
        self._axes = axes
        self._grid_points = count_grid_points(config)
        self._point_assignments = point_assignments
        self._point_free_axes = [
            [(p, v) for p, v in axes if not _covered(p, assignment)]
            for assignment in point_assignments
        ]
        self._constant_paths = [
            p for p, d in domains if isinstance(d, Domain) and not isinstance(d, Function)
        ]
        if isinstance(self._random_state, np.random.Generator):
            self._rng = self._random_state
        else:
            self._rng = np.random.default_rng(
                self._random_state if self._random_state is not None else seed
            )
        if self._pending_state is not None:
            state, self._pending_state = self._pending_state, None
            self._apply_state(state)
        return True

    def suggest(self, trial_id: str) -> dict | str | None:
        """The next config, None while ``max_concurrent`` trials are live, or FINISHED."""
        if self._space is None:
            raise RuntimeError(
                "BasicVariantGenerator.suggest: call set_search_properties(...) with the search "
                "space first"
            )
        if self._position >= self.total_trials:
            return Searcher.FINISHED
        if self._max_concurrent and len(self._live) >= self._max_concurrent:
            return None
        config = self._config_at(self._position)
        self._position += 1
        self._live.append(trial_id)
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False, **kwargs: Any
    ) -> None:
        if trial_id in self._live:
            self._live.remove(trial_id)

    def state_dict(self) -> dict:
        """Position, rng state and live trials: plain, picklable data (JSON-able too unless a
        ``constant_grid_search`` constant is not)."""
        state = super().state_dict()
        state.update(
            version=_STATE_VERSION,
            position=self._position,
            total_trials=self.total_trials,
            live=list(self._live),
            rng_state=self._rng.bit_generator.state if self._rng is not None else None,
            constants=None
            if self._constants is None
            else [[list(p), v] for p, v in self._constants.items()],
        )
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state``. Call it after ``set_search_properties`` with the same space
        (or before it: it is then applied when the space is set)."""
        if not isinstance(state, dict) or "position" not in state or "rng_state" not in state:
            raise ValueError(
                "state must be a dict from BasicVariantGenerator.state_dict(), got "
                f"{type(state).__name__}"
            )
        super().load_state_dict(state)
        if self._space is None:
            self._pending_state = dict(state)
        else:
            self._apply_state(state)

    # ----------------------------------------------------------------- internals

    def _apply_state(self, state: dict) -> None:
        total = state.get("total_trials")
        if total is not None and total != self.total_trials:
            raise ValueError(
                f"state: it was saved for {total} trials but this search space, num_samples and "
                f"points_to_evaluate give {self.total_trials}"
            )
        self._position = int(state["position"])
        self._live = list(state.get("live", []))
        constants = state.get("constants")
        self._constants = None if constants is None else {tuple(p): v for p, v in constants}
        rng_state = state["rng_state"]
        if rng_state is not None:
            bit_generator = getattr(np.random, rng_state["bit_generator"])()
            bit_generator.state = rng_state
            self._rng = np.random.Generator(bit_generator)

    def _config_at(self, position: int) -> dict:
        assert self._space is not None and self._rng is not None
        rng = self._rng
        n_points = len(self._points)
        if position < n_points:
            assignment = dict(self._point_assignments[position])
            for path, values in self._point_free_axes[position]:
                assignment[path] = values[int(rng.integers(len(values)))]
            return resolve_config(self._space, assignment, rng)
        index = (position - n_points) % self._grid_points
        assignment = grid_assignment_at(self._axes, index)
        if self._constant_grid_search:
            if index == 0 or self._constants is None:
                self._constants = {
                    p: sample_domain(_get(self._space, p), rng) for p in self._constant_paths
                }
            assignment.update(self._constants)
        return resolve_config(self._space, assignment, rng)


# --------------------------------------------------------------------- helpers


def _check_seed(value: Any, field: str, *, allow_generator: bool) -> None:
    if value is None or (allow_generator and isinstance(value, np.random.Generator)):
        return
    if not is_seed(value):
        allowed = "an integer >= 0, a numpy Generator or None" if allow_generator \
            else "an integer >= 0 or None"
        raise ValueError(f"{field} must be {allowed}, got {value!r}")


def _get(node: Any, path: Path) -> Any:
    for key in path:
        node = node[key]
    return node


def _covered(axis: Path, assignment: Mapping[Path, Any]) -> bool:
    """Whether an assigned path is ``axis`` or one of its ancestors."""
    return any(axis[: len(p)] == p for p in assignment)


def _lookup(config: dict, parts: Path, where: str) -> Any:
    """The space node at ``parts``, or _MISSING; a path through a grid axis is an error."""
    node: Any = config
    for depth, key in enumerate(parts):
        if is_grid_search(node) or isinstance(node, Domain):
            raise ValueError(
                f"{where}: key {path_str(parts)!r} goes inside the search leaf at "
                f"{path_str(parts[:depth])!r}; give that key's whole value instead"
            )
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, (list, tuple)) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return _MISSING
    return node


def _point_assignment(config: dict, point: Mapping, index: int) -> dict[Path, Any]:
    """``{path: value}`` for one entry of points_to_evaluate, checked against the space; with no
    space (``config == {}``) the point is the whole config, as it is."""
    where = f"points_to_evaluate[{index}]"
    out: dict[Path, Any] = {}
    if not config:
        return {(key,): copy.deepcopy(value) for key, value in point.items()}

    def walk(node: Mapping, prefix: Path) -> None:
        for key, value in node.items():
            path = prefix + (key,)
            target = _lookup(config, path, where)
            if target is _MISSING and isinstance(key, str) and "/" in key:
                path = prefix + tuple(key.split("/"))  # a flattened "a/b" key
                target = _lookup(config, path, where)
            if target is _MISSING:
                raise ValueError(
                    f"{where}: key {path_str(path)!r} is not in the search space (config)"
                )
            if isinstance(value, Mapping) and isinstance(target, dict) \
                    and not is_grid_search(target):
                walk(value, path)
                continue
            if isinstance(target, Domain) and not target.is_valid(value):
                logger.warning("%s: value %r of %r is outside %r", where, value,
                               path_str(path), target)
            elif is_grid_search(target) and value not in target["grid_search"]:
                logger.warning("%s: value %r of %r is not one of the grid values %r", where,
                               value, path_str(path), target["grid_search"])
            out[path] = value

    walk(point, ())
    return out
