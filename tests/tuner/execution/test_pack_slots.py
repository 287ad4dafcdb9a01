"""Slots of packed trials (tuner/execution/pack_backend.py, slots.py): members share their pack's
group, which counts once against the cluster; a pack is made when none of its shape has room and
given back with its last member, so idle members make way for trials of other shapes."""

from __future__ import annotations

from typing import Any

from tuner.execution.pack_backend import MemberHandle, MemberPlacement, PackingBackend
from tuner.execution.resources import PlacementGroupFactory
from tuner.execution.slots import SlotPool


class Cluster:
    """A backend of 2 CPUs that records what it places and destroys, and runs no actor."""

    def __init__(self) -> None:
        self.packs: list[int] = []  # capacity of each pack placed
        self.placed = 0
        self.destroyed: list[Any] = []
        self.calls: list[tuple[Any, ...]] = []

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}

    def nodes(self) -> list[dict[str, float]]:
        return [{"CPU": 2.0}]

    def place(self, pgf: PlacementGroupFactory) -> tuple[Any, Any]:
        self.placed += 1
        return f"actor{self.placed}", "group"

    def place_pack(self, pgf: PlacementGroupFactory, capacity: int) -> tuple[Any, Any]:
        self.packs.append(capacity)
        return f"pack{len(self.packs)}", "pack group"

    def destroy(self, actor: Any, group: Any) -> None:
        self.destroyed.append(actor)

    def call(self, actor: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((actor, method, *args))
        return object()


MEMBER = MemberPlacement("shape", 4, [{"CPU": 1.0}])
PLAIN = PlacementGroupFactory([{"CPU": 1.0}])


def test_members_share_their_packs_group_and_idle_ones_give_it_back_for_another_shape():
    cluster = Cluster()
    pool = SlotPool(PackingBackend(cluster))
    first = [pool.take(f"t{i}", MEMBER) for i in range(4)]
    assert cluster.packs == [4] and {s.actor.pack.actor for s in first} == {"pack1"}
    assert sorted(s.actor.slot for s in first) == [0, 1, 2, 3] and all(isinstance(s.actor, MemberHandle) for s in first)
    fifth = pool.take("t4", MEMBER)
    assert cluster.packs == [4, 4] and fifth.actor.pack.actor == "pack2"
    assert pool.take("plain", PLAIN) is None  # the two packs hold both CPUs, whatever their members' share
    for i in range(4):
        pool.release(f"t{i}", stop_trainable=True)  # idle: pack1 waits for members of its shape
    assert ("pack1", "call", 0, 0, "stop", (), {}) in cluster.calls
    again = pool.take("t5", MEMBER)  # a new member takes an idle slot of its shape
    assert again.actor.pack.actor == "pack1" and cluster.packs == [4, 4]
    pool.release("t5", stop_trainable=True)
    plain = pool.take("plain", PLAIN)  # the idle members are given back, and pack1 with its last one
    assert plain is not None and cluster.destroyed == ["pack1"]
