"""``env_threads=True``: a rollout actor's envs each step in a thread of their own, streaming apart.

For simulators that wait (a sleeping or remote simulator, a C extension that lets the GIL go):
one actor process hosts several envs without stepping them in lock-step, so a slow step delays
only its own env, as with one actor per env, but with a fraction of the processes. On few cores
a process is what a rollout actor costs most to start (a Ray worker and its imports, nearly a
CPU-second), and its idle threads cost CPU all along.

Each env is a *lane*: a :class:`~algorithms.sampling.rollout_worker.RolloutWorker` of one env sharing
the actor's policy (:class:`SharedPolicy`), streaming in its own thread; a take returns one
fragment per lane. Streams only (``sample_async=True``), on-policy trainers only (the trainer's
config check says so).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from algorithms.sampling.fragment import Fragment
    from algorithms.sampling.rollout_worker import RolloutWorker

#: Added to the actor's seed per lane, so each lane's env and action draws differ.
LANE_SEED_STRIDE = 104_729


class SharedPolicy:
    """One policy acted on by several lanes' threads: a call at a time, and a set of weights loaded
    once however many lanes ask (they all get the same object from :class:`EnvThreads`)."""

    def __init__(self, policy: Any) -> None:
        self._policy = policy
        self._lock = threading.Lock()
        self._loaded: Any = None

    def act(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self._policy.act(*args, **kwargs)

    def value(self, obs: Any) -> Any:
        with self._lock:
            return self._policy.value(obs)

    def begin_fragment(self) -> None:
        with self._lock:
            self._policy.begin_fragment()

    def load_weights(self, weights: Mapping[str, Any]) -> None:
        with self._lock:
            if weights is not self._loaded:
                self._policy.load_weights(weights)
                self._loaded = weights

    def __getattr__(self, name: str) -> Any:  # anything else (get_weights, bind_worker, ...)
        return getattr(self._policy, name)


class EnvThreads:
    """The lanes of one rollout actor, and what its stream, take and weights calls do with them."""

    def __init__(self, lane_class: type[RolloutWorker]) -> None:
        self.lane_class = lane_class  # the rollout worker's own class: handed in, so no import cycle
        self.lanes: list[RolloutWorker] = []

    def configure(self, *, num_envs: int, seed: int | None, policy_factory: Any, policy_kwargs: Mapping[str, Any],
                  **settings: Any) -> SharedPolicy:
        """One lane per env (the envs of lanes configured before are kept when the env is the same),
        all acting with one new policy; returns it."""
        shared = SharedPolicy(policy_factory(**policy_kwargs))
        for i in range(num_envs):
            lane_settings = dict(settings, num_envs=1, policy_factory=policy_factory, policy_kwargs=policy_kwargs,
                                 seed=None if seed is None else seed + i * LANE_SEED_STRIDE, policy=shared,
                                 single_thread=True, vector_index=i)
            if i < len(self.lanes):
                self.lanes[i].configure(**lane_settings)
            else:
                self.lanes.append(self.lane_class(**lane_settings))
        for lane in self.lanes[num_envs:]:
            lane.close()
        del self.lanes[num_envs:]
        return shared

    def stream(self, weights_version: int, weights: Any, request: int, max_ahead: int | None) -> None:
        """Every lane streams in a thread of its own until request ``request`` is aborted."""
        errors: list[BaseException] = []

        def run(lane: RolloutWorker) -> None:
            try:
                lane.stream(weights_version, [weights], request, max_ahead)
            except Exception as exc:  # noqa: BLE001 - raised again in the actor's call below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(lane,), daemon=True) for lane in self.lanes[1:]]
        for thread in threads:
            thread.start()
        run(self.lanes[0])
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def abort(self, upto: int) -> None:
        for lane in self.lanes:
            lane.abort(upto)

    def take(self) -> list[Fragment] | None:
        """One fragment per lane that sampled since the last take, or None when none did."""
        fragments: list[Fragment] = []
        for lane in self.lanes:  # a lane has one env and no lanes of its own: a fragment or None
            taken = lane.take()
            if taken is not None and not isinstance(taken, list):
                fragments.append(taken)
        return fragments or None

    def push_weights(self, weights_version: int, weights: Any) -> None:
        for lane in self.lanes:
            lane.push_weights(weights_version, [weights])

    def set_max_ahead(self, steps: int | None) -> None:
        for lane in self.lanes:
            lane.set_max_ahead(steps)

    def slots_sampled(self) -> int:
        return sum(lane.slots_sampled() for lane in self.lanes)

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()
