"""The Ray actor of a pack: one process hosting the trial actors of a pack's members.

Each member slot has a :class:`~tuner.execution.trial_actor.TrialActor` of its own, so a member
is started, run, saved, exploited and stopped exactly as a trial of its own actor; the trainable
each runs is the trainer's packed one (``Trainable.packed_trainable``), and they share the
process's :class:`~tuner.trainable.pack.Pack`. The actor is threaded (a member's ``run`` waits in
the pack for the others'), so it orders each member's calls itself: the controller numbers them
(see ``pack_backend``) and a member's call runs once its previous one has ended, as the calls of
a trial's own actor do.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from tuner.execution.trial_actor import TrialActor
from tuner.trainable import pack
from tuner.trainable.context import TrialInfo
from tuner.trainable.trainable import Trainable


class _MemberActor(TrialActor):
    """A member's trial actor: it runs the trainer's packed trainable instead of the trainer."""

    def start(self, trainable_cls: type[Trainable], config: dict[str, Any], info: TrialInfo, *args: Any,
              **kwargs: Any) -> None:
        packed = trainable_cls.packed_trainable()
        if packed is None:
            raise TypeError(f"pack_trials: {trainable_cls.__name__} has no packed trainable")
        super().start(packed, config, info, *args, **kwargs)


class PackActor:
    """Hosts the members of one pack of ``capacity`` slots."""

    def __init__(self, capacity: int) -> None:
        # As TrialActor's: the sweep's end kills the actor; nothing here needs a clean exit.
        signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
        self._pack = pack.open_pack(capacity)
        self._members = [_MemberActor() for _ in range(capacity)]
        self._order = threading.Condition()
        self._next = [0] * capacity  # the number of each member's next call to run

    def call(self, slot: int, number: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Member ``slot``'s call ``number`` (0, 1, ...): ``method(*args, **kwargs)`` of its trial actor."""
        with self._order:
            while self._next[slot] != number:
                self._order.wait()
        try:
            with pack.member_call(slot):
                return getattr(self._members[slot], method)(*args, **kwargs)
        finally:
            with self._order:
                self._next[slot] = number + 1
                self._order.notify_all()

    def members(self) -> list[int]:
        """The slots whose members are in the pack now."""
        return self._pack.members
