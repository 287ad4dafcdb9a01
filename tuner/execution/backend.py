"""What the controller and the slot pool need of the cluster, behind one small interface.

The controller's decisions (which trial starts, what a result leads to, pauses, exploits,
retries) do not depend on Ray; only placing trial actors, calling them and waiting for their
answers do. :class:`Backend` names those operations and :class:`RayBackend` does them with Ray,
which is what ``tune.run`` uses; tests drive the real controller with an in-process backend
instead (see ``tests/tuner/execution/fake_backend.py``), so its decisions are tested without Ray.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from tuner.execution import placement_release
from tuner.execution.resources import PlacementGroupFactory
from tuner.execution.trial_actor import TrialActor

__all__ = ["Backend", "CallFailed", "RayBackend"]


class CallFailed(Exception):
    """A call on a trial actor failed: the trainable raised (``error`` is its traceback) or, with
    ``actor_died``, the actor itself is gone and nothing of it can be reused."""

    def __init__(self, error: str, actor_died: bool) -> None:
        super().__init__(error)
        self.error = error
        self.actor_died = actor_died


class Backend(Protocol):
    """Trial actors in groups of reserved resources, calls on them, and the cluster's size.

    Actors are :class:`~tuner.execution.trial_actor.TrialActor` s; a call answers through an
    opaque, hashable handle that :meth:`wait` and :meth:`get` take. Calls on one actor run in the order
    they were made.
    """

    def cluster_resources(self) -> dict[str, float]:
        """The cluster's total resources (name -> amount)."""
        ...

    def nodes(self) -> list[dict[str, float]]:
        """The resources of each live node."""
        ...

    def place(self, pgf: PlacementGroupFactory) -> tuple[Any, Any]:
        """A new actor in a new group of shape ``pgf``: (actor, group)."""
        ...

    def destroy(self, actor: Any, group: Any) -> None:
        """Kill the actor and give its group back (either may be gone already)."""
        ...

    def place_group(self, bundles: list[dict[str, float]]) -> Any:
        """A new group of ``bundles`` with no actor in it (a running trial's extra resources)."""
        ...

    def remove_group(self, group: Any) -> None:
        """Give a group back (what runs in it dies with it)."""
        ...

    def call(self, actor: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        """Start ``actor.method(*args, **kwargs)``; returns the handle of its answer."""
        ...

    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        """The handles whose answers are in, waiting at most ``timeout`` s for the first."""
        ...

    def get(self, handle: Any) -> Any:
        """The answer of a finished call; raises :class:`CallFailed` when the call failed."""
        ...

    def discard(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        """Answers no longer wanted: read (failures included) those in within ``timeout`` s, so
        that none is reported as an error nobody handled; returns the handles not in yet."""
        ...

    def watch_release(self, freed: Mapping[str, float]) -> None:
        """The sweep gave back its groups (at most ``freed`` at once): watch for them to be free."""
        ...

    def await_release(self) -> None:
        """Wait (briefly) for an earlier sweep's groups to be free before placing new ones."""
        ...


_RemoteTrialActor = ray.remote(max_restarts=0, max_task_retries=0)(TrialActor)


class RayBackend:
    """The :class:`Backend` of ``tune.run``: Ray actors in Ray placement groups."""

    def cluster_resources(self) -> dict[str, float]:
        return {k: float(v) for k, v in ray.cluster_resources().items()}

    def nodes(self) -> list[dict[str, float]]:
        return [{k: float(v) for k, v in node["Resources"].items()} for node in ray.nodes() if node.get("Alive")]

    def place(self, pgf: PlacementGroupFactory) -> tuple[Any, Any]:
        pg = placement_group(pgf.bundles, strategy=pgf.strategy)
        head = pgf.bundles[0]
        custom = {k: v for k, v in head.items() if k not in ("CPU", "GPU", "memory")}
        actor = _RemoteTrialActor.options(
            num_cpus=head.get("CPU", 0.0),
            num_gpus=head.get("GPU", 0.0),
            memory=head.get("memory") or None,
            resources=custom or None,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True
            ),
        ).remote(exit_quietly_on_sigterm=True)
        return actor, pg

    def place_pack(self, pgf: PlacementGroupFactory, capacity: int) -> tuple[Any, Any]:
        """A new pack actor of ``capacity`` member slots in a new group of shape ``pgf`` (see
        ``pack_backend``): threaded, a thread per member's call and a few for its other calls."""
        from tuner.execution.pack_actor import PackActor

        pg = placement_group(pgf.bundles, strategy=pgf.strategy)
        head = pgf.bundles[0]
        actor = ray.remote(max_restarts=0, max_task_retries=0)(PackActor).options(
            num_cpus=head.get("CPU", 0.0), num_gpus=head.get("GPU", 0.0), max_concurrency=3 * capacity + 4,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True),
        ).remote(capacity)
        return actor, pg

    def place_group(self, bundles: list[dict[str, float]]) -> Any:
        # Not waited for: the accounting said it fits, and actors placed in it wait until it is ready.
        return placement_group([dict(b) for b in bundles], strategy="PACK")

    def remove_group(self, group: Any) -> None:
        try:
            remove_placement_group(group)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def destroy(self, actor: Any, group: Any) -> None:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            remove_placement_group(group)
        except Exception:  # noqa: BLE001
            pass

    def call(self, actor: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(actor, method).remote(*args, **kwargs)

    def wait(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        refs = list(handles)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and len(refs) > 1:  # and every other answer already in, for one pass over them
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return list(ready)

    def get(self, handle: Any) -> Any:
        try:
            return ray.get(handle)
        except (RayTaskError, RayActorError) as exc:
            actor_died = isinstance(exc, RayActorError) and not isinstance(exc, RayTaskError)
            raise CallFailed(_error_text(exc), actor_died) from exc

    def discard(self, handles: Sequence[Any], timeout: float) -> list[Any]:
        refs = list(handles)
        if not refs:
            return []
        # Ray prints an error object freed unread as "Unhandled error": the sweep already said
        # why these calls stopped mattering.
        ready, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for ref in ready:
            try:
                ray.get(ref, timeout=0)
            except Exception:  # noqa: BLE001 - the point is to read it, whatever it holds
                pass
        return list(waiting)

    def watch_release(self, freed: Mapping[str, float]) -> None:
        placement_release.watch_release(freed)

    def await_release(self) -> None:
        placement_release.await_release()


def _error_text(exc: BaseException) -> str:
    cause = exc
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        cause = exc.cause
    text = str(cause)
    return text if text else repr(cause)
