"""Packed trials behind the :class:`~tuner.execution.backend.Backend` interface.

A packed trial's placement (:class:`MemberPlacement`) is a share of a pack: the controller, the
slot pool and everything above see one slot per trial, as for any trial; :class:`PackingBackend`
places each such slot in a pack of its signature with room left (a pack actor and its placement
group are made for the first member, and given back with the last), and sends the slot's calls
to its pack's actor, numbered so that the actor runs them in order (see ``pack_actor``). A slot
a trial leaves is the next trial's of the same signature, as any slot is: a new trial takes a
stopped member's place in the pack. Other placements go to the backend it wraps.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Hashable, Mapping, Sequence

from tuner.execution.backend import Backend, CallFailed
from tuner.execution.resources import PlacementGroupFactory

__all__ = ["MemberHandle", "MemberPlacement", "PackingBackend"]


class MemberPlacement(PlacementGroupFactory):
    """A member's share of a pack: ``1 / capacity`` of the pack's ``pack_bundles`` (what the pack's
    placement group reserves), for trials whose configs have ``signature``."""

    def __init__(self, signature: Hashable, capacity: int, pack_bundles: Sequence[Mapping[str, float]]) -> None:
        share = [{name: amount / capacity for name, amount in pack_bundles[0].items()}]
        super().__init__(share)
        self.signature = signature
        self.capacity = capacity
        self.pack = PlacementGroupFactory(pack_bundles)

    def key(self) -> tuple[Any, ...]:
        return ("pack", self.signature, self.capacity, self.pack.key())

    def __repr__(self) -> str:
        return f"MemberPlacement(1/{self.capacity} of {self.pack.bundles})"


@dataclasses.dataclass(eq=False)
class _Pack:
    actor: Any
    group: Any
    pgf: PlacementGroupFactory  # what its group reserves
    free: list[int]
    held: set[int] = dataclasses.field(default_factory=set)
    dead: bool = False


@dataclasses.dataclass(eq=False)
class MemberHandle:
    """A member slot of a pack: what the slot pool holds as the slot's actor (its pack's group
    is what the slots of that pack hold together)."""

    pack: _Pack
    slot: int
    numbers: Any = dataclasses.field(default_factory=itertools.count)


class PackingBackend:
    """``inner``'s placements and calls, and packs of members (see the module docstring)."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner
        self._packs: dict[Hashable, list[_Pack]] = {}
        self._member_calls: dict[Any, _Pack] = {}  # a member call's answer handle -> its pack

    def place(self, pgf: PlacementGroupFactory) -> tuple[Any, Any]:
        if not isinstance(pgf, MemberPlacement):
            return self._inner.place(pgf)
        packs = self._packs.setdefault(pgf.key(), [])
        pack = next((p for p in packs if p.free and not p.dead), None)
        if pack is None:
            actor, group = self._inner.place_pack(pgf.pack, pgf.capacity)  # type: ignore[attr-defined]
            pack = _Pack(actor, group, pgf.pack, free=list(range(pgf.capacity)))
            packs.append(pack)
        slot = pack.free.pop(0)
        pack.held.add(slot)
        handle = MemberHandle(pack, slot)
        return handle, handle

    def has_room(self, pgf: MemberPlacement) -> bool:
        """Whether a member of ``pgf`` would join a pack there is (no new group reserved)."""
        return any(p.free and not p.dead for p in self._packs.get(pgf.key(), []))

    def destroy(self, actor: Any, group: Any) -> None:
        if not isinstance(actor, MemberHandle):
            self._inner.destroy(actor, group)
            return
        pack = actor.pack
        if actor.slot in pack.held:
            pack.held.discard(actor.slot)
            if not pack.dead:
                self.call(actor, "stop")  # its member leaves; the slot is free for a new pack member
                pack.free.append(actor.slot)
        if not pack.held:  # the last member went: the pack's process and group go too
            for packs in self._packs.values():
                if pack in packs:
                    packs.remove(pack)
            self._inner.destroy(pack.actor, pack.group)

    def call(self, actor: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(actor, MemberHandle):
            return self._inner.call(actor, method, *args, **kwargs)
        handle = self._inner.call(actor.pack.actor, "call", actor.slot, next(actor.numbers), method, args, kwargs)
        if method != "stop":  # a stop's answer is never read (see SlotPool.release): nothing to look up
            self._member_calls[handle] = actor.pack
        return handle

    def get(self, handle: Any) -> Any:
        pack = self._member_calls.pop(handle, None)
        try:
            return self._inner.get(handle)
        except CallFailed as exc:
            if pack is not None and exc.actor_died:
                pack.dead = True  # no new member goes there; its members are retried elsewhere
            raise

    def discard(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        waiting = self._inner.discard(handles, timeout)
        for handle in set(handles) - set(waiting):
            self._member_calls.pop(handle, None)
        return waiting

    # -- the rest is the inner backend's -----------------------------------------------------------
    def cluster_resources(self) -> dict[str, float]:
        return self._inner.cluster_resources()

    def nodes(self) -> list[dict[str, float]]:
        return self._inner.nodes()

    def place_group(self, bundles: list[dict[str, float]]) -> Any:
        return self._inner.place_group(bundles)

    def remove_group(self, group: Any) -> None:
        self._inner.remove_group(group)

    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        return self._inner.wait(handles, timeout)

    def watch_release(self, freed: Mapping[str, float]) -> None:
        self._inner.watch_release(freed)

    def await_release(self) -> None:
        self._inner.await_release()
