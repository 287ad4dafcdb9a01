"""What the controller does when a scheduler changes a running trial's resources.

``ResourceChangingScheduler`` calls ``set_trial_resources`` from inside its ``on_trial_result``.
A trainable that takes new bundles in place (``Trainable.accepts_resources``: our trainers, one
more rollout actor per bundle) keeps running: the bundles beyond its own placement group are
reserved as groups of their own (Ray cannot resize a placement group), handed to it before its
next iteration, and given back once it has let them go. Any other trainable restarts from a
checkpoint in a group of the new shape, as in Ray Tune.

A component of the controller: it is handed the slot pool, the calls in flight and the profiler,
and two questions it asks about a trial (what its trainable prepared for its config, whether it
can be saved); the controller passes it the answers to its ``Call.RESOURCES`` calls
(:meth:`ResourceChanges.updated`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from schedulers.resource_changing import RESOURCES_IN_PLACE, RESOURCES_ON_RESTART, RESOURCES_REFUSED
from schedulers.trial_status import TrialStatus
from tuner.execution.protocol import Call
from tuner.execution.resources import PlacementGroupFactory, check_feasible

if TYPE_CHECKING:
    from tuner.execution.calls import Calls
    from tuner.execution.profiler import SweepProfiler
    from tuner.execution.slots import SlotPool
    from tuner.execution.trial import Trial
    from tuner.trainable.trainable import Trainable

logger = logging.getLogger("tuner.execution.controller")


class ResourceChanges:
    """``set_trial_resources`` and its follow-ups, for the controller.

    ``prepared(trial)``: what the trainable's ``prepare_trial`` gave for the trial's config;
    ``cannot_save(trial, to)``: whether the trial cannot be checkpointed (said once, naming ``to``).
    """

    def __init__(self, pool: SlotPool, calls: Calls, trainable_cls: type[Trainable],
                 prepared: Callable[[Trial], Any], cannot_save: Callable[[Trial, str], bool],
                 profiler: SweepProfiler | None = None) -> None:
        self._pool = pool
        self._calls = calls
        self._trainable_cls = trainable_cls
        self._prepared = prepared
        self._cannot_save = cannot_save
        self._profiler = profiler

    def cluster_resources(self) -> dict[str, float]:
        """The cluster's total resources (re-read every few seconds)."""
        self._pool.read_cluster_resources()
        return self._pool.total

    def resize(self, trial: Trial, bundles: list[dict[str, float]]) -> str:
        """Give the running ``trial`` (its result being decided) the placement-group ``bundles``
        (``ResourceChangingScheduler``).

        In place when its trainable takes them (``Trainable.accepts_resources``): bundles beyond
        those of the trial's own group are each reserved as a group of their own (a Ray placement
        group cannot be resized), only when free; the trial actor hands them to the trainable
        before its next iteration (``update_resources``), and groups it no longer needs are given
        back once it confirms it let them go. Otherwise Ray Tune's way: the trial restarts from a
        checkpoint in a group of the new shape (answered RESOURCES_ON_RESTART: the scheduler
        pauses it), or keeps what it has when it cannot be checkpointed (RESOURCES_REFUSED).
        """
        slot = self._pool.running.get(trial.trial_id)
        if slot is None or trial.status != TrialStatus.RUNNING:
            return RESOURCES_REFUSED
        new = PlacementGroupFactory(bundles, strategy=slot.pgf.strategy)
        own = slot.pgf.bundles
        cls = self._trainable_cls
        if (cls.supports_elastic_resources and new.bundles[:len(own)] == own
                and cls.accepts_resources(trial.config, new.bundles, self._prepared(trial))):
            extra, current = new.bundles[len(own):], slot.extension_bundles
            keep = 0
            while keep < min(len(extra), len(current)) and extra[keep] == current[keep]:
                keep += 1
            groups = self._pool.resize_extensions(trial.trial_id, keep, extra[keep:])
            if groups is None:
                return RESOURCES_REFUSED  # not free (yet): the next result asks again
            self._profile_resize(trial)
            self._calls.send(trial, Call.RESOURCES, slot.actor, "update_resources", new.bundles, groups)
            trial.placement_group_factory = new
            logger.info("trial %s now holds %d bundles (%s CPUs) in place", trial.trial_name, len(new.bundles),
                        new.required().get("CPU", 0.0))
            return RESOURCES_IN_PLACE
        try:
            check_feasible(new, self._pool.nodes, f"new resources of trial {trial.trial_name}")
        except ValueError as exc:
            logger.warning("%s; it keeps its resources", exc)
            return RESOURCES_REFUSED
        if self._cannot_save(trial, "restart with new resources"):
            return RESOURCES_REFUSED
        trial.placement_group_factory = new
        return RESOURCES_ON_RESTART

    def updated(self, trial: Trial, in_place: Any) -> None:
        """The trial actor applied a ``set_trial_resources``: the groups it let go are given back."""
        self._pool.remove_retired(trial.trial_id)
        if not in_place:
            logger.warning("trial %s did not take its new resources in place; it keeps its own group only",
                           trial.trial_name)
            slot = self._pool.running.get(trial.trial_id)
            if slot is not None:
                self._pool.resize_extensions(trial.trial_id, 0, [])
                self._pool.remove_retired(trial.trial_id)
                trial.placement_group_factory = slot.pgf
        self._profile_resize(trial)

    def _profile_resize(self, trial: Trial) -> None:
        """The profile counts the CPUs of the trial's extension groups (retiring ones included)."""
        slot = self._pool.running.get(trial.trial_id)
        if self._profiler is None or slot is None:
            return
        extensions = slot.extension_bundles + [bundle for _, bundle in slot.retiring]
        cpus = slot.pgf.required().get("CPU", 0.0) + sum(float(b.get("CPU", 0.0)) for b in extensions)
        self._profiler.resize(trial.trial_id, cpus)

    def reset(self, trial: Trial) -> None:
        """A trial that grew in place gives its extension groups back with its slot: it restarts
        with its own group's bundles (and may grow again)."""
        slot = self._pool.running.get(trial.trial_id)
        if slot is not None and slot.extensions + slot.retiring:
            trial.placement_group_factory = slot.pgf
