"""The calls a sweep has in flight on its trial actors, and the answers it no longer wants.

Every call to a trial actor is sent through :class:`Calls` and stays in flight until its answer
is read: the event loop waits on all of them at once and takes whichever finish first. A trial
that ends or fails drops its calls; their answers are still read when they come (a Ray call
whose result is never read keeps its object alive), never acted on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tuner.execution.backend import Backend, CallFailed
from tuner.execution.protocol import Call

if TYPE_CHECKING:
    from tuner.execution.trial import Trial


class Calls:
    """Calls in flight, each with the trial it is for and what it was (a :class:`Call`)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._inflight: dict[Any, tuple[Trial, Call]] = {}  # a call's answer handle -> what it was
        self._discarded: list[Any] = []  # answers no longer wanted, read when they come

    def __bool__(self) -> bool:
        return bool(self._inflight)

    def send(self, trial: Trial, kind: Call, actor: Any, method: str, *args: Any, **kwargs: Any) -> None:
        """Call ``method`` on the trial's ``actor``; its answer comes back from :meth:`answers`."""
        self._inflight[self._backend.call(actor, method, *args, **kwargs)] = (trial, kind)

    def answers(self, timeout: float) -> Iterator[tuple[Trial, Call, Any]]:
        """The calls that finished within ``timeout`` (none waited for when nothing is in flight):
        each as (trial, kind, answer), the answer a :class:`CallFailed` when the call failed."""
        if self._discarded:
            self._discarded = self._backend.discard(self._discarded, timeout=0)
        if not self._inflight:
            return
        for ref in self._backend.wait(list(self._inflight), timeout):
            if ref not in self._inflight:  # dropped while an earlier answer was acted on
                continue
            trial, kind = self._inflight.pop(ref)
            try:
                value = self._backend.get(ref)
            except CallFailed as exc:
                value = exc
            yield trial, kind, value

    def pausing(self, trial: Trial) -> bool:
        """Whether a save that pauses ``trial`` is in flight."""
        return any(other is trial and kind is Call.PAUSE for other, kind in self._inflight.values())

    def drop(self, trial: Trial) -> None:
        """Forget the calls in flight for ``trial``: their answers no longer matter."""
        for ref, (other, _) in list(self._inflight.items()):
            if other is trial:
                del self._inflight[ref]
                self._discarded.append(ref)

    def drop_all(self) -> None:
        """Forget every call in flight (the sweep stops)."""
        self._discarded.extend(self._inflight)
        self._inflight.clear()

    def read_discarded(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the answers no longer wanted (the sweep ends)."""
        self._discarded = self._backend.discard(self._discarded, timeout=timeout)
