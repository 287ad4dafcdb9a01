"""A wrapper that runs each suggested config several times and tells the mean (Ray Tune's name).

Each config the wrapped searcher suggests becomes a *group* of ``repeat`` trials with that
config; with ``set_index=True`` trial ``i`` of a group gets ``config["__trial_index__"] = i``
(to seed from). The wrapped searcher sees only the group's first trial: it is told that trial's
completion once every trial of the group has ended, with the mean of their final metric values.

    >>> from tuner.search.basic_variant import BasicVariantGenerator
    >>> from tuner.search.space import uniform
    >>> repeater = Repeater(BasicVariantGenerator(random_state=0), repeat=2)
    >>> repeater.set_search_properties("loss", "min", {"x": uniform(0, 1)}, num_samples=1)
    True
    >>> a, b = repeater.suggest("a"), repeater.suggest("b")
    >>> a["x"] == b["x"], a["__trial_index__"], b["__trial_index__"]
    (True, 0, 1)
    >>> repeater.suggest("c") == "FINISHED"
    True
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

from schedulers.validation import is_int, is_number

from .basic_variant import BasicVariantGenerator
from .concurrency_limiter import _accepted_kwargs
from .searcher import Searcher

__all__ = ["Repeater", "TRIAL_INDEX"]

logger = logging.getLogger(__name__)

#: The config key holding a trial's index in its group (Ray Tune's ``TRIAL_INDEX``).
TRIAL_INDEX = "__trial_index__"

_STATE_VERSION = 1


class _Group:
    """The trials sharing one suggested config; the first one is the wrapped searcher's."""

    def __init__(self, primary: str, config: dict, size: int) -> None:
        self.primary = primary
        self.config = config
        self.size = size
        self.members: list[str] = [primary]
        #: trial_id -> (score or NaN, error, pruned, last training_iteration or None), once ended.
        self.ended: dict[str, tuple[float, bool, bool, int | None]] = {}
        self.told = False  # the wrapped searcher was told the group's outcome

    def full(self) -> bool:
        return len(self.members) >= self.size

    def done(self) -> bool:
        return self.full() and len(self.ended) == self.size

    def to_state(self) -> dict[str, Any]:
        return {
            "primary": self.primary,
            "config": copy.deepcopy(self.config),
            "size": self.size,
            "members": list(self.members),
            "ended": {tid: list(v) for tid, v in self.ended.items()},
            "told": self.told,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "_Group":
        group = cls(state["primary"], copy.deepcopy(state["config"]), int(state["size"]))
        group.members = list(state["members"])
        group.ended = {tid: (float(s), bool(e), bool(p), it) for tid, (s, e, p, it) in state["ended"].items()}
        group.told = bool(state["told"])
        return group


class Repeater(Searcher):
    """Run each config of ``searcher`` as ``repeat`` trials and tell it their mean.

    Args:
        searcher: the searcher whose suggestions are repeated; it sees one trial per group.
        repeat: trials per suggested config (an int >= 1).
        set_index: give each trial ``config["__trial_index__"]``, its index in its group.

    As in Ray Tune, ``num_samples`` counts trials, repeats included: ``num_samples=15`` with
    ``repeat=5`` makes 3 groups (a warning says so when it is not a multiple of ``repeat``; the
    last group is then left incomplete and its config never told). Wrapping the grid x random
    :class:`BasicVariantGenerator` instead repeats each of its configs ``repeat`` times.

    A group's outcome goes to the wrapped searcher once all of its trials have ended: the mean
    of their final ``metric`` values, over the trials that reported it (a failed trial, or one
    that ended without the metric, counts as missing, Ray Tune's ``nanmean``). To a scheduler
    every trial is an ordinary one: a trial a scheduler stopped early (ASHA) counts with its
    value at the stop. The wrapped searcher is told ``error=True`` (and no result) only when no
    trial of the group gave a value and one failed, and ``pruned=True`` (when it accepts that
    keyword, as :class:`OptunaSearch` does) only when a scheduler stopped every trial of the group.
    Intermediate results are not passed on (the wrapped searcher's trial is a group, not one run).
    """

    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True) -> None:
        if not isinstance(searcher, Searcher):
            raise ValueError(f"searcher must be a Searcher, got {type(searcher).__name__}")
        if not is_int(repeat, numpy=False) or repeat < 1:
            raise ValueError(f"repeat must be an integer >= 1, got {repeat!r}")
        if not isinstance(set_index, bool):
            raise ValueError(f"set_index must be True or False, got {set_index!r}")
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher = searcher
        self.repeat = int(repeat)
        self.set_index = set_index
        self._groups: list[_Group] = []
        self._group_of: dict[str, _Group] = {}

    # metric and mode are the wrapped searcher's (it may learn them in set_search_properties).
    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    @property
    def groups(self) -> list[dict[str, Any]]:
        """Each group so far: its ``primary`` trial (the one the wrapped searcher knows), its
        ``config``, its ``trials`` in index order and whether its mean was ``told``."""
        return [{"primary": g.primary, "config": copy.deepcopy(g.config), "trials": list(g.members),
                 "told": g.told} for g in self._groups]

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        num_samples: Any = spec.get("num_samples")
        inner = self.searcher
        while not isinstance(inner, BasicVariantGenerator) and isinstance(getattr(inner, "searcher", None), Searcher):
            inner = inner.searcher  # type: ignore[attr-defined]
        if is_int(num_samples) and num_samples % self.repeat and not isinstance(inner, BasicVariantGenerator):
            logger.warning(
                "Repeater: num_samples=%d is not a multiple of repeat=%d. num_samples counts the trials, "
                "repeats included (num_samples=15 with repeat=5 gives 3 configs); the last %d trial(s) "
                "make a group that never completes, whose mean is never told to the searcher",
                num_samples, self.repeat, num_samples % self.repeat,
            )
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict | str | None:
        if trial_id in self._group_of:
            raise ValueError(f"Repeater.suggest: trial {trial_id!r} was suggested already")
        current = self._groups[-1] if self._groups else None
        if current is None or current.full():
            config = self.searcher.suggest(trial_id)
            if config is None or config == Searcher.FINISHED:
                return config
            if not isinstance(config, dict):
                raise TypeError(f"{type(self.searcher).__name__}.suggest returned {config!r}: expected a dict")
            current = _Group(trial_id, copy.deepcopy(config), self.repeat)
            self._groups.append(current)
        else:
            current.members.append(trial_id)
        self._group_of[trial_id] = current
        config = copy.deepcopy(current.config)
        if self.set_index:
            config[TRIAL_INDEX] = current.members.index(trial_id)
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False, pruned: bool = False,
        **kwargs: Any,
    ) -> None:
        group = self._group_of.get(trial_id)
        if group is None:
            logger.warning("Repeater: on_trial_complete for unknown trial %r; ignored", trial_id)
            return
        if group.told:
            logger.warning("Repeater: trial %r ended again after its group was told; ignored", trial_id)
            return
        value: Any = result.get(self.metric) if result and self.metric is not None else None
        score = float(value) if is_number(value) else math.nan
        iteration: Any = result.get("training_iteration") if result else None
        group.ended[trial_id] = (score, bool(error), bool(pruned), int(iteration) if is_int(iteration) else None)
        if group.done():
            self._tell(group, kwargs)

    def state_dict(self) -> dict:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "version": _STATE_VERSION,
            "repeat": self.repeat,
            "groups": [g.to_state() for g in self._groups],
            "searcher": self.searcher.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore the groups and the wrapped searcher's state. The ``repeat`` and ``set_index``
        given to this repeater's constructor are kept for the groups still to come."""
        if not isinstance(state, dict) or "groups" not in state or "searcher" not in state:
            raise ValueError(
                f"state must be a dict from Repeater.state_dict(), got {type(state).__name__}"
            )
        self._groups = [_Group.from_state(g) for g in state["groups"]]
        self._group_of = {tid: g for g in self._groups for tid in g.members}
        self.searcher.load_state_dict(state["searcher"])

    # ----------------------------------------------------------------- internals

    def _tell(self, group: _Group, kwargs: dict[str, Any]) -> None:
        """Tell the wrapped searcher the group's outcome (see the class docstring)."""
        outcomes = [group.ended[tid] for tid in group.members]
        scores = [s for s, _, _, _ in outcomes if not math.isnan(s)]
        iterations = [it for _, _, _, it in outcomes if it is not None]
        error = not scores and any(e for _, e, _, _ in outcomes)
        pruned = all(p for _, _, p, _ in outcomes)
        result: dict[str, Any] | None = None
        if scores:
            assert self.metric is not None  # a score is the metric's value
            result = {self.metric: sum(scores) / len(scores)}
            if iterations:
                result["training_iteration"] = max(iterations)
        group.told = True
        method = self.searcher.on_trial_complete
        extra = dict(kwargs)
        if pruned:
            extra["pruned"] = True
        method(group.primary, result, error=error, **_accepted_kwargs(method, extra))
