"""``pack_trials``: which trials run packed, how many to a pack, and the one line that says so.

A trainer that can pack (``Trainable.pack_signature``) gives each config a signature; trials of
equal signatures share packs of up to ``capacity`` members (see ``pack_backend``). ``"auto"``
packs where the trainer can and there are more trials than the cluster has room for learners
side by side (by every resource a learner asks: CPUs, and GPUs for learners on a GPU): as many
members to a pack as spread the planned trials over those learners (at most :data:`AUTO_MAX`). An int is the most members to a pack, and packing then is an order: a config
the trainer cannot pack is an error naming ``pack_trials``, before anything runs.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Mapping

from tuner.execution.pack_backend import MemberPlacement
from tuner.execution.resources import PlacementGroupFactory
from tuner.pack_trials import check_pack_trials
from tuner.search.space import Domain, is_grid_search
from tuner.trainable.trainable import Trainable

__all__ = ["AUTO_MAX", "PackPlan"]

logger = logging.getLogger(__name__)

#: The most members ``pack_trials="auto"`` puts in one pack.
AUTO_MAX = 32


class PackPlan:
    """``resources_for`` of a sweep with ``pack_trials``: a member's placement for a config that
    packs, ``base(config)`` for one that does not. ``planned``: the trials the sweep will run
    (None: its searcher decides); ``cluster``: the cluster's resources, read on first use; ``say``: how
    the sweep says its one line on packing; ``space``: the searched space (``tune.run``'s config
    and a searcher's own); ``define_by_run``: the searcher suggests its space trial by trial."""

    def __init__(self, trainable_cls: type[Trainable], pack_trials: Any, planned: int | None,
                 base: Callable[[dict[str, Any]], PlacementGroupFactory], cluster: Callable[[], Mapping[str, float]],
                 say: Callable[[str], None], space: Mapping[str, Any] | None = None,
                 define_by_run: bool = False) -> None:
        check_pack_trials(pack_trials)
        self._cls = trainable_cls
        # Searched keys that fix a pack's shape: "auto" expects no two trials to share a pack
        self._varied = sorted(k for k in trainable_cls.pack_shape_keys() if _searched((space or {}).get(k)))
        self._define_by_run = define_by_run
        self._pack_trials = pack_trials
        self._planned = planned
        self._base = base
        self._cluster = cluster
        self._say = say
        self._said: set[str] = set()

    @property
    def forced(self) -> bool:
        return self._pack_trials is not False and self._pack_trials != "auto"

    def __call__(self, config: dict[str, Any]) -> PlacementGroupFactory:
        pgf = self._base(config)
        if self._pack_trials is False or self._pack_trials == 1:
            return pgf
        signature, how = self._cls.pack_signature(config)
        if signature is not None and len(pgf.bundles) > 1:
            signature, how = None, f"its trials need {len(pgf.bundles)} bundles (a pack is one process)"
        if signature is not None and self._varied and not self.forced:
            signature, how = None, (f"the search varies {', '.join(self._varied)}: keys that fix a pack's shape "
                                    f"(pack_trials=N packs the trials that match)")
        if signature is not None and self._define_by_run and not self.forced:
            signature, how = None, ("the searcher suggests its space trial by trial, so it may vary keys that fix a "
                                    "pack's shape (pack_trials=N packs the trials that match)")
        if signature is None:
            if self.forced:
                raise ValueError(f"pack_trials={self._pack_trials}: trials of {self._cls.__name__} cannot be packed: {how}")
            self._once(f"pack_trials='auto': trials of {self._cls.__name__} run one per process: {how}")
            return pgf
        capacity = self._pack_trials if self.forced else self._auto_capacity(pgf)
        if capacity < 2:
            self._once(f"pack_trials='auto': trials of {self._cls.__name__} run one per process: the cluster has a "
                       f"learner's room for each of the {self._planned} trial(s)")
            return pgf
        self._once(f"pack_trials={self._pack_trials!r}: trials of {self._cls.__name__} run packed, up to {capacity} "
                   f"to a process ({how})")
        return MemberPlacement((self._cls.__qualname__, signature), capacity, pgf.bundles)

    def _auto_capacity(self, pgf: PlacementGroupFactory) -> int:
        cluster = self._cluster()
        learner = {name: amount for name, amount in pgf.bundles[0].items() if amount > 0} or {"CPU": 1.0}
        side_by_side = max(1, min(int(cluster.get(name, 0.0) / amount + 1e-9) for name, amount in learner.items()))
        planned = AUTO_MAX * side_by_side if self._planned is None else self._planned
        return min(AUTO_MAX, math.ceil(planned / side_by_side))

    def _once(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            logger.info("%s", line)
            self._say(line)


def _searched(value: Any) -> bool:
    """Whether a param-space value is searched (a domain, a grid, or a dict holding one)."""
    if isinstance(value, Domain) or is_grid_search(value):
        return True
    return isinstance(value, Mapping) and any(_searched(v) for v in value.values())
