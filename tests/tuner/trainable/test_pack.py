"""The pack a packed trial's trainable shares with the other members of its process
(tuner/trainable/pack.py): members step together, one population iteration for all who ask; a
member that leaves or holds back does not hold the others; a failed iteration fails its members."""

from __future__ import annotations

import threading

import pytest

from tuner.trainable import pack as packs


class Population:
    """Records the iterations asked of it; ``fail`` makes the next one raise."""

    def __init__(self) -> None:
        self.iterations: list[list[int]] = []
        self.joined: dict[int, dict] = {}
        self.fail = False

    def join(self, m, config):
        self.joined[m] = dict(config)

    def train(self, learning):
        if self.fail:
            self.fail = False
            raise ValueError("diverged")
        self.iterations.append(list(learning))
        return [{"member": m, "iteration": len(self.iterations)} for m in learning]

    def stop(self):
        pass


def _pack(members: int, capacity: int = 4) -> tuple[packs.Pack, Population]:
    pack = packs.Pack(capacity)
    population = pack.population(Population)
    for m in range(members):
        pack.join(m, {"lr": m})
    return pack, population


def _step_in_threads(pack: packs.Pack, slots: list[int]) -> dict[int, object]:
    out: dict[int, object] = {}

    def step(m):
        try:
            out[m] = pack.step(m)
        except BaseException as exc:  # noqa: BLE001
            out[m] = exc

    threads = [threading.Thread(target=step, args=(m,)) for m in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


def test_members_that_ask_together_share_one_iteration():
    pack, population = _pack(3)
    out = _step_in_threads(pack, [0, 1, 2])
    assert population.iterations == [[0, 1, 2]]
    assert {m: r["member"] for m, r in out.items()} == {0: 0, 1: 1, 2: 2}


def test_a_member_that_leaves_no_longer_holds_the_others(monkeypatch):
    monkeypatch.setattr(packs, "STRAGGLER_S", 3600.0)  # only the leaving can release member 0
    pack, population = _pack(2)
    out: dict[int, object] = {}
    t = threading.Thread(target=lambda: out.setdefault(0, pack.step(0)))
    t.start()
    pack.leave(1)
    t.join(timeout=60)
    assert population.iterations == [[0]] and out[0]["member"] == 0
    assert pack.members == [0]


def test_members_that_waited_long_enough_step_without_an_absent_one(monkeypatch):
    monkeypatch.setattr(packs, "STRAGGLER_S", 0.01)
    pack, population = _pack(3)
    out = _step_in_threads(pack, [0, 2])  # member 1 never asks: it keeps its state
    assert population.iterations == [[0, 2]] and set(out) == {0, 2}


def test_a_failed_iteration_fails_each_of_its_members_and_the_next_runs():
    pack, population = _pack(2)
    population.fail = True
    out = _step_in_threads(pack, [0, 1])
    assert all(isinstance(v, ValueError) for v in out.values())
    out = _step_in_threads(pack, [0, 1])
    assert population.iterations == [[0, 1]]


def test_a_slot_outside_the_pack_or_not_joined_is_refused():
    pack, _ = _pack(1, capacity=2)
    with pytest.raises(ValueError, match="pack_trials: slot 2 is outside this pack of 2"):
        pack.join(2, {})
    with pytest.raises(RuntimeError, match="pack_trials: slot 1 asked for an iteration without joining"):
        pack.step(1)


def test_a_packed_trainable_outside_a_pack_actor_is_told_so(monkeypatch):
    monkeypatch.setattr(packs, "_PACK", None)
    with pytest.raises(RuntimeError, match="runs only inside a pack's actor"):
        packs.current_pack()
    with pytest.raises(RuntimeError, match="no member's call runs on this thread"):
        packs.current_slot()


def test_a_members_latest_save_is_recalled_until_it_saves_again_or_leaves():
    pack, _ = _pack(2)
    pack.remember(0, "/c/1", {"v": 1})
    assert pack.recall("/c/1") == {"v": 1} and pack.recall("/c/9") is None
    pack.remember(0, "/c/2", {"v": 2})
    assert pack.recall("/c/1") is None and pack.recall("/c/2") == {"v": 2}
    pack.leave(0)
    assert pack.recall("/c/2") is None


def test_after_a_slow_iteration_members_wait_as_long_for_the_late_before_stepping_without_them(monkeypatch):
    monkeypatch.setattr(packs, "STRAGGLER_S", 0.01)
    pack, population = _pack(2)
    pack._last_step_s = 3600.0  # the last population iteration took an hour: worth waiting that long
    out: dict[int, object] = {}
    early = threading.Thread(target=lambda: out.setdefault(0, pack.step(0)))
    early.start()
    early.join(timeout=0.5)
    assert early.is_alive() and population.iterations == []  # far past STRAGGLER_S, still waiting
    out.update(_step_in_threads(pack, [1]))
    early.join(timeout=60)
    assert population.iterations == [[0, 1]] and {out[0]["member"], out[1]["member"]} == {0, 1}
