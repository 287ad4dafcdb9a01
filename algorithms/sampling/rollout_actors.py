"""Rollout actors as Ray actors: started in a trial's placement group, parked between trainers.

A rollout actor is a Ray worker process with its imports and envs: the expensive part of a
trial's start. When a trainer stops inside a placement group, its actors are parked here (in the
trial actor's process) by (group, bundle index), and the next trainer of the same group takes
them back (:meth:`ParkedActors.take`) instead of starting new processes. Actors parked for
another group are killed: that group went with its trial.
"""

from __future__ import annotations

import os
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from algorithms.sampling.rollout_worker import RolloutWorker

__all__ = ["PARKED", "ParkedActors", "RemoteRolloutWorker", "cores_here", "kill", "same_group", "start_actor"]

#: ``abort`` runs in a thread of its own while ``sample`` runs; requests run one at a time, in order.
RemoteRolloutWorker = ray.remote(  # type: ignore[call-overload]
    # ray.remote's typed overloads leave out the actor option concurrency_groups, which Ray accepts
    max_restarts=0, max_task_retries=0, concurrency_groups={"control": 1})(RolloutWorker)


def start_actor(kwargs: dict[str, Any], index: int, cpus: float, group: Any | None, extension: Any | None) -> Any:
    """A new rollout actor for slot ``index``: in bundle 0 of its ``extension`` group when it has
    one, else in bundle ``index`` of the trial's ``group`` (any bundle when it takes no CPU), else
    wherever Ray places it (a trainer outside a placement group)."""
    options: dict[str, Any] = {"num_cpus": cpus}
    if extension is not None:
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=extension, placement_group_bundle_index=0)
    elif group is not None:
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=index if cpus > 0 else -1)
    return RemoteRolloutWorker.options(**options).remote(**kwargs, worker_index=index)


class ParkedActors:
    """Actors of stopped trainers, by (placement group id, bundle index), for the next trainer."""

    def __init__(self) -> None:
        self._actors: dict[tuple[str, int], Any] = {}

    def park(self, group_id: str, index: int, actor: Any) -> None:
        for key in [k for k in self._actors if k[0] != group_id]:  # another group's: gone with it, or soon
            kill(self._actors.pop(key))
        self._actors[(group_id, index)] = actor

    def take(self, group_id: str, index: int) -> Any | None:
        """The actor parked in slot ``index`` of the group (no longer parked), or None."""
        return self._actors.pop((group_id, index), None)

    def indices(self) -> list[int]:
        """The slots with a parked actor, in order."""
        return sorted(index for _, index in self._actors)


#: This process's parked actors (a trial actor hosts one trainer at a time, then the next).
PARKED = ParkedActors()


def cores_here() -> int:
    """The cores this process may run on: how many new actors a trainer lets start at once."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def kill(actor: Any) -> None:
    try:
        ray.kill(actor)
    except Exception:  # noqa: BLE001 - already gone
        pass


def same_group(a: Any, b: Any) -> bool:
    """Whether two placement-group handles name one group: each call brings new handle objects
    (Ray deserialises them), so identity says nothing and an unchanged group looked new."""
    return a is b or (a is not None and b is not None and a.id == b.id)
