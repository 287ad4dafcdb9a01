"""An in-process :class:`~tuner.execution.backend.Backend` for testing the controller without Ray.

Each "actor" is a real :class:`~tuner.execution.trial_actor.TrialActor` living in this process;
a call runs at once, when the controller makes it (so the calls on one actor run in the order
they were made, as Ray runs them), and its answer waits for :meth:`FakeBackend.wait`, which hands
back the oldest answer in flight, one per pass of the controller's loop: trials take turns, in
the same order every run. Nothing sleeps and nothing starts Ray.
"""

from __future__ import annotations

import dataclasses
import itertools
import traceback
from typing import Any, Callable, Mapping, Sequence

from tuner.execution.backend import CallFailed
from tuner.execution.resources import PlacementGroupFactory
from tuner.execution.trial_actor import TrialActor, TrialError


@dataclasses.dataclass
class FakeActor:
    """A trial actor of the fake cluster; ``dead`` once killed (its calls then fail as Ray's do)."""

    name: str
    host: TrialActor
    dead: bool = False


@dataclasses.dataclass(eq=False)  # a handle: hashable, equal only to itself
class Answer:
    """The answer of one call: its value, or the failure :meth:`FakeBackend.get` raises."""

    actor: str
    method: str
    value: Any = None
    failure: CallFailed | None = None


class FakeBackend:
    """A cluster of ``cpus`` CPUs and ``gpus`` GPUs on one node, in this process.

    ``calls`` logs every call as (actor name, method); ``placed`` and ``destroyed`` count the
    groups made and given back. ``kill_when(actor_name, method)`` returning True makes that call
    fail as if the actor's process had died.
    """

    def __init__(self, cpus: float = 4.0, gpus: float = 0.0,
                 kill_when: Callable[[str, str], bool] | None = None) -> None:
        self._resources = {"CPU": float(cpus), "GPU": float(gpus)}
        self._kill_when = kill_when
        self._names = itertools.count()
        self.actors: list[FakeActor] = []
        self.calls: list[tuple[str, str]] = []
        self.placed = 0
        self.destroyed = 0
        self.discarded: list[Any] = []
        self.released: dict[str, float] | None = None
        self.node_reads = 0  # how often the controller asked for the cluster's nodes

    def cluster_resources(self) -> dict[str, float]:
        return dict(self._resources)

    def nodes(self) -> list[dict[str, float]]:
        self.node_reads += 1
        return [dict(self._resources)]

    def place(self, pgf: PlacementGroupFactory) -> tuple[Any, Any]:
        self.placed += 1
        actor = FakeActor(f"actor{next(self._names)}", TrialActor())
        self.actors.append(actor)
        return actor, pgf.required()

    def place_group(self, bundles: list[dict[str, float]]) -> Any:
        self.placed += 1
        return [dict(b) for b in bundles]

    def remove_group(self, group: Any) -> None:
        self.destroyed += 1

    def destroy(self, actor: Any, group: Any) -> None:
        if not actor.dead:
            actor.dead = True
            actor.host.stop()  # the trainable's cleanup, as the actor's exit would end it
        self.destroyed += 1

    def call(self, actor: Any, method: str, *args: Any, **kwargs: Any) -> Answer:
        self.calls.append((actor.name, method))
        if not actor.dead and self._kill_when is not None and self._kill_when(actor.name, method):
            actor.dead = True
        if actor.dead:
            return Answer(actor.name, method, failure=CallFailed(f"{actor.name} died", actor_died=True))
        try:
            return Answer(actor.name, method, value=getattr(actor.host, method)(*args, **kwargs))
        except TrialError as exc:  # the trainable failed: the actor lives on, as with Ray
            return Answer(actor.name, method, failure=CallFailed(str(exc), actor_died=False))
        except Exception:  # noqa: BLE001 - a fault of the actor itself, which Ray would report the same way
            return Answer(actor.name, method, failure=CallFailed(traceback.format_exc(), actor_died=False))

    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        return list(handles[:1])

    def get(self, handle: Any) -> Any:
        if handle.failure is not None:
            raise handle.failure
        return handle.value

    def discard(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        self.discarded.extend(handles)
        return []

    def watch_release(self, freed: Mapping[str, float]) -> None:
        self.released = dict(freed)

    def await_release(self) -> None:
        pass
