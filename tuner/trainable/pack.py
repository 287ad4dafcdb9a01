"""A pack: trials of one shape signature trained as one population, in one process.

The engine runs a pack as one actor (``tuner.execution.pack_actor``) hosting one trainable per
member trial; the members' trainables share this process's :class:`Pack`, which holds their
population learner (a trainer's, e.g. ``algorithms.ppo.population.PopulationPPO``) and steps it
for all the members that ask at once. Each member is still a trial for the engine: it is
started, stepped, saved, restored, exploited and stopped on its own.

A member's ``step`` waits until every member of the pack asks for its next iteration, then one
population iteration answers them all. A member the controller holds back (waiting for a PBT
donor's checkpoint, say) would hold every other one back too, and may be waiting on one of them:
so when some members have waited for the others, the population steps for the waiting members
only, and the absent ones keep their state, untouched, until they come. They wait
:data:`STRAGGLER_S`, or as long as the last iteration took if that is longer: an iteration for some
members costs about as much as one for all (every member's envs step), so waiting up to one
iteration for the late is never dearer than stepping twice, and on a loaded machine, where calls
arrive late, it keeps a pack from stepping its members one by one.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

__all__ = ["Pack", "Population", "STRAGGLER_S", "current_pack", "current_slot", "open_pack"]

#: How long the first member to ask for an iteration waits for the others before the population
#: steps without them (or as long as the last iteration took, if that is longer).
STRAGGLER_S = 0.5


class Population(Protocol):
    """What a trainer's population learner offers a pack (slots ``0 .. capacity - 1``)."""

    def join(self, m: int, config: Mapping[str, Any]) -> None:
        """Slot ``m`` starts anew as a member of ``config``."""
        ...

    def train(self, learning: Sequence[int]) -> list[dict[str, Any]]:
        """One iteration of the members ``learning`` (sorted); one result each, in order."""
        ...

    def stop(self) -> None:
        """Release what the population holds (its envs)."""
        ...


class Pack:
    """The members of one pack actor and their population (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._cond = threading.Condition()
        self._population: Any = None
        self._members: set[int] = set()
        self._waiting: dict[int, float] = {}  # slot -> when it asked for its next iteration
        self._results: dict[int, dict[str, Any] | BaseException] = {}
        self._saved: dict[int, tuple[str, Any]] = {}  # slot -> its latest checkpoint's (path, state)
        self._last_step_s = 0.0  # how long the last population iteration took

    def population(self, build: Callable[[], Any]) -> Any:
        """The pack's population, built by the first member to ask (``build``)."""
        with self._cond:
            if self._population is None:
                self._population = build()
            return self._population

    @contextlib.contextmanager
    def locked(self) -> Iterator[Any]:
        """The population, to read or change one member's state between iterations."""
        with self._cond:
            yield self._population

    def remember(self, slot: int, path: str, state: Any) -> None:
        """Keep the state member ``slot`` saved at ``path`` (its latest only): a PBT exploit
        inside the pack takes the donor's slice from here instead of reading its checkpoint back."""
        with self._cond:
            self._saved[slot] = (path, state)

    def recall(self, path: str) -> Any:
        """The state a member of this pack saved at ``path`` if it is one's latest, else None."""
        with self._cond:
            return next((state for saved, state in self._saved.values() if saved == path), None)

    def join(self, slot: int, config: Mapping[str, Any]) -> None:
        """Slot ``slot`` joins as a member of ``config``."""
        if not 0 <= slot < self.capacity:
            raise ValueError(f"pack_trials: slot {slot} is outside this pack of {self.capacity}")
        with self._cond:
            self._population.join(slot, config)
            self._members.add(slot)
            self._results.pop(slot, None)

    def leave(self, slot: int) -> None:
        """Slot ``slot``'s member is gone: the others no longer wait for it."""
        with self._cond:
            self._members.discard(slot)
            self._waiting.pop(slot, None)
            self._saved.pop(slot, None)
            self._cond.notify_all()

    @property
    def members(self) -> list[int]:
        with self._cond:
            return sorted(self._members)

    def step(self, slot: int) -> dict[str, Any]:
        """Member ``slot``'s next iteration: its result, once the population has stepped."""
        with self._cond:
            if slot not in self._members:
                raise RuntimeError(f"pack_trials: slot {slot} asked for an iteration without joining the pack")
            self._waiting[slot] = time.monotonic()
            self._cond.notify_all()
            while slot not in self._results:
                wait = self._wait_s()
                if wait <= 0:
                    self._step_waiting()
                else:
                    self._cond.wait(wait)
            out = self._results.pop(slot)
        if isinstance(out, BaseException):
            raise out
        return out

    def _wait_s(self) -> float:
        """0 when the waiting members should step now, else how long to wait before looking again."""
        if not self._waiting:
            return STRAGGLER_S
        if self._members <= set(self._waiting):
            return 0.0
        patience = max(STRAGGLER_S, self._last_step_s)
        return min(self._waiting.values()) + patience - time.monotonic()

    def _step_waiting(self) -> None:
        learning = sorted(self._waiting)
        self._waiting.clear()
        start = time.monotonic()
        try:
            results: list[dict[str, Any] | BaseException] = list(self._population.train(learning))
        except BaseException as exc:  # noqa: BLE001 - every member of the iteration gets it
            results = [exc] * len(learning)
        self._last_step_s = time.monotonic() - start
        self._results.update(zip(learning, results))
        self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            if self._population is not None:
                self._population.stop()
                self._population = None


_PACK: Pack | None = None
_SLOT = threading.local()


def open_pack(capacity: int) -> Pack:
    """This process's pack (one pack per process: the pack actor's)."""
    global _PACK
    _PACK = Pack(capacity)
    return _PACK


def current_pack() -> Pack:
    """The pack of this process; a RuntimeError outside a pack actor."""
    if _PACK is None:
        raise RuntimeError("pack_trials: a packed trainable runs only inside a pack's actor (tune.run packs "
                           "trials with pack_trials); train the trainer itself outside a sweep")
    return _PACK


def current_slot() -> int:
    """The slot of the member whose call this thread is running."""
    slot = getattr(_SLOT, "slot", None)
    if slot is None:
        raise RuntimeError("pack_trials: no member's call runs on this thread")
    return int(slot)


@contextlib.contextmanager
def member_call(slot: int) -> Iterator[None]:
    """Run a call of member ``slot`` on this thread (the pack actor's)."""
    _SLOT.slot = slot
    try:
        yield
    finally:
        _SLOT.slot = None
