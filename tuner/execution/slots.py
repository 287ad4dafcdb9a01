"""The trial actors of a sweep and the placement groups they live in, as a pool of slots.

A trial takes a slot of its shape, an idle one first: when a trial ends its actor and group are
handed to the next trial of the same shape, so a sweep of many short trials does not pay for a
new Ray worker process per trial. The pool also accounts for what the sweep holds against the
cluster's resources, which decides whether another group can be placed now.

A running trial may also hold *extension* groups (``ResourceChangingScheduler`` grew it in place):
Ray cannot resize a placement group, so each bundle a trial gains is a group of its own beside
the trial's, added and removed one by one without touching the trial's own group. They count
against the cluster like any group, and go when the trial shrinks, pauses, ends or fails; a slot
goes idle (or to the next trial) with its own group only.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from tuner.execution.backend import Backend, RayBackend
from tuner.execution.pack_backend import MemberHandle, MemberPlacement, PackingBackend
from tuner.execution.resources import PlacementGroupFactory, fits

__all__ = ["Slot", "SlotPool"]

_RESOURCE_REFRESH_S = 5.0


@dataclasses.dataclass
class Slot:
    """A trial actor and the placement group it lives in."""

    actor: Any
    pg: Any  # the placement group (the backend's handle of the reserved resources)
    pgf: PlacementGroupFactory
    has_trainable: bool = False
    #: Extension groups of one bundle each, in order (bundle ``len(pgf.bundles) + i`` of the trial).
    extensions: list[Any] = dataclasses.field(default_factory=list)
    extension_bundles: list[dict[str, float]] = dataclasses.field(default_factory=list)
    #: Extension groups the trial is letting go (its trainable confirms, then they are removed).
    retiring: list[tuple[Any, dict[str, float]]] = dataclasses.field(default_factory=list)


class SlotPool:
    """The slots of running trials (``running``, by trial id) and the idle ones, ready for reuse."""

    def __init__(self, backend: Backend | None = None, *, cpu_share: float | None = None) -> None:
        self.backend: Backend = backend if backend is not None else PackingBackend(RayBackend())
        #: The share of the cluster's CPUs this sweep's groups may hold at once (None: all of them);
        #: its first trial always runs, whatever it asks for.
        self.cpu_share = cpu_share
        self.running: dict[str, Slot] = {}  # trial_id -> slot of a running trial
        self._idle: list[Slot] = []  # slots whose trial ended, ready for the next trial
        self._total: dict[str, float] = {}
        self.nodes: list[dict[str, float]] = []  # the resources of each live node
        self._peak_held: dict[str, float] = {}  # the most of each resource this sweep's groups held at once
        self._resources_read_at = 0.0

    def take(self, trial_id: str, pgf: PlacementGroupFactory) -> Slot | None:
        """A slot of shape ``pgf`` for ``trial_id``, now running; None when it does not fit yet."""
        slot = self._idle_or_new(pgf)
        if slot is not None:
            self.running[trial_id] = slot
        return slot

    def release(self, trial_id: str, *, stop_trainable: bool) -> None:
        """The trial's slot becomes idle, its trainable stopped first when ``stop_trainable``."""
        slot = self.running.pop(trial_id, None)
        if slot is None:
            return
        if stop_trainable:
            self.backend.call(slot.actor, "stop")
        self._drop_extensions(slot)
        self._idle.append(slot)

    # -- extension groups of a running trial ------------------------------------------------------
    def resize_extensions(self, trial_id: str, keep: int, add: list[dict[str, float]]) -> list[Any] | None:
        """Keep the trial's first ``keep`` extension groups, retire the rest and add one group per
        bundle of ``add``; returns the groups the trial holds now, or None (nothing changed) when
        ``add`` does not fit the cluster's free resources. Retired groups still count until
        :meth:`remove_retired`."""
        slot = self.running[trial_id]
        if add:
            need: dict[str, float] = {}
            for bundle in add:
                for name, amount in bundle.items():
                    need[name] = need.get(name, 0.0) + amount
            self.read_cluster_resources()
            if self.cpu_share is not None:  # growth keeps the sweep within its share, as new trials do
                budget = self.cpu_share * self._total.get("CPU", 0.0)
                if self._held().get("CPU", 0.0) + need.get("CPU", 0.0) > budget + 1e-9:
                    return None
            if not fits(need, self._available()):
                while self._idle:  # idle groups wait for a trial of their shape: a running one comes first
                    self._destroy(self._idle.pop())
                if not fits(need, self._available()):
                    return None
        slot.retiring.extend(zip(slot.extensions[keep:], slot.extension_bundles[keep:]))
        del slot.extensions[keep:], slot.extension_bundles[keep:]
        for bundle in add:
            slot.extensions.append(self.backend.place_group([bundle]))
            slot.extension_bundles.append(dict(bundle))
        for name, amount in self._held().items():
            self._peak_held[name] = max(self._peak_held.get(name, 0.0), amount)
        return list(slot.extensions)

    def remove_retired(self, trial_id: str) -> None:
        """The trial let its retiring extension groups go: give them back."""
        slot = self.running.get(trial_id)
        if slot is not None:
            for group, _ in slot.retiring:
                self.backend.remove_group(group)
            slot.retiring.clear()

    def _drop_extensions(self, slot: Slot) -> None:
        for group in slot.extensions + [g for g, _ in slot.retiring]:
            self.backend.remove_group(group)
        slot.extensions.clear()
        slot.extension_bundles.clear()
        slot.retiring.clear()

    def discard(self, trial_id: str) -> None:
        """The trial's slot is destroyed (its actor died: nothing there to reuse)."""
        slot = self.running.pop(trial_id, None)
        if slot is not None:
            self._destroy(slot)

    def destroy_idle(self) -> None:
        while self._idle:
            self._destroy(self._idle.pop())

    def destroy_running(self) -> None:
        for slot in self.running.values():
            self._destroy(slot)
        self.running.clear()

    def destroy_all(self) -> None:
        """Every slot destroyed; the groups are watched until Ray has them back."""
        for slot in list(self.running.values()) + self._idle:
            self._destroy(slot)
        self.running.clear()
        self._idle.clear()
        if self._peak_held:
            self.backend.watch_release(self._peak_held)

    @property
    def total(self) -> dict[str, float]:
        """The cluster's total resources, as last read."""
        return dict(self._total)

    def read_cluster_resources(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._resources_read_at < _RESOURCE_REFRESH_S:
            return
        self._resources_read_at = now
        self._total = self.backend.cluster_resources()
        self.nodes = self.backend.nodes()

    def _idle_or_new(self, pgf: PlacementGroupFactory) -> Slot | None:
        key = pgf.key()
        for i, slot in enumerate(self._idle):
            if slot.pgf.key() == key:
                return self._idle.pop(i)
        self.read_cluster_resources()
        if not self._within_share(pgf):
            return None
        if not fits(self._new_reservation(pgf), self._available()):
            if not self._idle:
                return None
            while self._idle:  # give back groups of other shapes, then try again
                self._destroy(self._idle.pop())
            if not fits(self._new_reservation(pgf), self._available()):
                return None
        actor, pg = self.backend.place(pgf)
        slot = Slot(actor=actor, pg=pg, pgf=pgf)
        for name, amount in self._held(extra=slot).items():
            self._peak_held[name] = max(self._peak_held.get(name, 0.0), amount)
        return slot

    def _new_reservation(self, pgf: PlacementGroupFactory) -> dict[str, float]:
        """What placing a slot of ``pgf`` reserves: its group's resources, or for a pack's member
        nothing when it joins a pack there is, else the new pack's group (see ``pack_backend``)."""
        if isinstance(pgf, MemberPlacement):
            has_room = getattr(self.backend, "has_room", None)
            return {} if has_room is not None and has_room(pgf) else pgf.pack.required()
        return pgf.required()

    def _within_share(self, pgf: PlacementGroupFactory) -> bool:
        """Whether a new group of ``pgf`` keeps this sweep within its share of the cluster's CPUs
        (so that sweeps sharing a cluster all progress: see ``cpu_share``)."""
        if self.cpu_share is None or not (self.running or self._idle):
            return True
        budget = self.cpu_share * self._total.get("CPU", 0.0)
        return self._held().get("CPU", 0.0) + self._new_reservation(pgf).get("CPU", 0.0) <= budget + 1e-9

    def _held(self, extra: Slot | None = None) -> dict[str, float]:
        """The resources of the placement groups this sweep holds (and of ``extra``)."""
        held: dict[str, float] = {}
        packs: set[int] = set()  # the members of a pack hold its group together: counted once
        for slot in list(self.running.values()) + self._idle + ([extra] if extra else []):
            reserved = slot.pgf.required()
            if isinstance(slot.actor, MemberHandle):
                first = id(slot.actor.pack) not in packs
                packs.add(id(slot.actor.pack))
                reserved = slot.actor.pack.pgf.required() if first else {}
            for name, amount in reserved.items():
                held[name] = held.get(name, 0.0) + amount
            for bundle in slot.extension_bundles + [b for _, b in slot.retiring]:
                for name, amount in bundle.items():
                    held[name] = held.get(name, 0.0) + amount
        return held

    def _available(self) -> dict[str, float]:
        available = dict(self._total)
        for name, amount in self._held().items():
            available[name] = available.get(name, 0.0) - amount
        return available

    def _destroy(self, slot: Slot) -> None:
        self._drop_extensions(slot)
        self.backend.destroy(slot.actor, slot.pg)
