"""A trainer's rollout workers: Ray actors in the trial's placement group, or one in-process worker.

Within a sweep the controller hands a finished trial's actor and placement group to the next
trial of the same shape, and the rollout actors go along: parked when a trainer stops
(``rollout_actors``), taken back by the next trainer of the group with one ``configure`` call
(new env config, seeds and weights; the process and its imports kept). A parked actor that died
meanwhile is replaced like any other; outside a placement group a stopped trainer's are killed.

Three ways to sample: :meth:`WorkerGroup.sample` synchronously (every actor its share of the
batch, with the current weights) or with asynchronous requests (the first fragments to arrive),
and :meth:`WorkerGroup.stream` (every actor steps its envs without pause; the learner takes what
they sampled).

Elastic (``resize``, a ``ResourceChangingScheduler`` growing or shrinking the trial): actors past
the group's own are placed each in an extension placement group of one bundle (a Ray placement
group cannot be resized, so the trial's extra CPUs are groups of their own). New actors join the
running streams (or the next requests) as they come up; an actor let go finishes: its stream is
stopped between two env steps and everything it sampled goes into the next batch (a request in
flight is waited for and its fragment kept), then it is killed, never parked: its group goes.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections import Counter
from typing import Any, Callable, Mapping

import numpy as np
import ray
from ray.exceptions import RayActorError

from algorithms.sampling.fragment import Fragment, as_fragments
from algorithms.sampling.rollout_actors import PARKED, kill, same_group, start_actor
from algorithms.sampling.rollout_worker import RolloutWorker
from algorithms.sampling.stream_batches import aim, cut

logger = logging.getLogger(__name__)

#: How many times in a row one worker slot may die before the trial gives up.
MAX_CONSECUTIVE_WORKER_FAILURES = 3

#: Sample requests are numbered across the trainers of this process: an abort covers one trainer's.
_requests = itertools.count()


class WorkerGroup:
    """The rollout workers of one trainer and the fragments they are sampling.

    ``num_workers == 0``: one ``RolloutWorker`` in this process that acts with the learner's own
    policy object (no weight copies). Otherwise ``num_workers`` Ray actors, actor ``i`` in bundle
    ``i`` of the current placement group (bundle 0 is the learner's); a request's weights travel
    as ``[ObjectRef]``, so an actor fetches them only when their version changed.

    ``reused`` counts the actors taken over from an earlier trainer, ``started`` the new ones,
    and ``start_s`` the seconds from the group's creation until every actor was up (when the
    trainer waits for that, see :meth:`wait_until_up`) or else to its first fragment: the part of
    a trial's start that rollout actors cost.

    ``max_starting`` (streams): at most that many new actors start at once, the next one as soon
    as one is up (see :meth:`wait_until_up`). A new actor's start (a Ray worker process and its
    imports) is nearly a CPU-second; Ray throttles only the process launches, so unlimited starts
    compete and all come up together at the end, while a few at a time come up one after another,
    each sampling from the moment it is up.

    ``stream_ahead`` (streams): an on-policy trainer's batch; the streams and the leftover for
    the next batch together hold at most two of them (see :meth:`_max_ahead`), so that a learner
    slower than its actors gets batches sampled with the weights one or two updates old, not ever
    older ones. None: unbounded. ``whole_takes``: a batch is all that was taken, not cut to the
    steps asked for (a replay buffer's: its learner's updates follow the steps it got, while cut
    batches would leave a backlog growing ever older behind a learner of small rounds).
    """

    def __init__(
        self,
        *,
        worker_kwargs: dict[str, Any],
        num_workers: int,
        num_cpus_per_worker: float,
        local_policy: Any,
        max_starting: int | None = None,
        stream_ahead: int | None = None,
        whole_takes: bool = False,
    ) -> None:
        if max_starting is not None and max_starting < 1:
            raise ValueError(f"max_starting must be None or at least 1, got {max_starting!r}")
        if stream_ahead is not None and stream_ahead < 1:
            raise ValueError(f"stream_ahead must be None or at least 1, got {stream_ahead!r}")
        self.stream_ahead = stream_ahead
        self.whole_takes = whole_takes
        self._bound_sent: int | None = None  # the bound the running streams were last told (None: none yet)
        self.created_at = time.perf_counter()
        self._kwargs = worker_kwargs
        self.num_workers = num_workers
        self._cpus = float(num_cpus_per_worker)
        self.num_restarts = 0
        self.reused = self.started = 0
        self.start_s: float | None = None
        self._failures: dict[int, int] = {}
        self.nodes: dict[int, str] = {}  # worker index -> the node its last fragment came from
        self.local: RolloutWorker | None = None
        self.actors: dict[int, Any] = {}
        self._inflight: dict[ray.ObjectRef, tuple[int, Any]] = {}  # sample request -> (worker index, actor)
        self._streams: dict[int, ray.ObjectRef] = {}  # worker index -> its running stream call
        self._up: set[int] = set()  # worker indices whose actor has answered: up and running
        self._pending_take: dict[int, ray.ObjectRef] = {}  # a take asked of an actor still starting
        self._rate: float | None = None  # env steps/s of all streams together, from the last takes
        self._last_take = 0.0
        self._carry: list[Fragment] = []  # streamed steps left over from the last batch
        self._version = 0
        self._last_request = -1
        self._weights_ref: Any = None
        self._pg = None
        self._max_starting = max_starting
        self._deferred: list[int] = []  # indices whose actors start once earlier ones are up
        self._starting: dict[ray.ObjectRef, int] = {}  # ``ready`` of the new actors still starting
        self._streaming = False  # streams were started and not paused: a deferred actor streams at once
        self.base_workers = num_workers  # the actors in the trial's own group; more are in extensions
        self._extension: dict[int, Any] = {}  # worker index -> its extension group (bundle 0)
        self._stream_request: dict[int, int] = {}  # worker index -> its running stream's request number
        self._taken_slots: Counter[int] = Counter()  # worker index -> env steps taken from it
        self._orphans: list[Fragment] = []  # fragments of actors let go, for the next sample()
        #: Actors let go: (index, env steps it sampled, env steps taken from it): equal, or a step was lost.
        self.retired: list[tuple[int, int, int]] = []
        if num_workers == 0:
            self.local = RolloutWorker(**worker_kwargs, worker_index=0, single_thread=False, policy=local_policy)
            self.start_s = 0.0
            return
        self._pg = ray.util.get_current_placement_group()
        if self._pg is not None and self._cpus > 0 and len(self._pg.bundle_specs) < num_workers + 1:
            raise ValueError(
                f"num_workers={num_workers}: the trial's placement group has {len(self._pg.bundle_specs)} "
                f"bundles but needs {num_workers + 1} (one for the learner, one per rollout actor); leave "
                f"resources_per_trial unset so the trainer's default_resource_request is used"
            )
        self._start_actors()

    def _start_actors(self) -> None:
        """Actor ``i`` in bundle ``i``: the one an earlier trainer of this group parked there, else
        a new one (deferred while ``max_starting`` others start)."""
        for index in range(1, self.num_workers + 1):
            parked = self._take_parked(index)
            if parked is not None:
                self.actors[index] = parked
                self._up.add(index)
            elif self._max_starting is not None and len(self._starting) >= self._max_starting:
                self._deferred.append(index)
            else:
                self._launch(index)

    def placement(self) -> str:
        """Where the actors run, by node ("in the learner" for the in-process worker)."""
        if self.local is not None:
            return "in the learner"
        counts = Counter(self.nodes.values())
        return ", ".join(f"{node}: {n} actor{'s' if n > 1 else ''}" for node, n in sorted(counts.items()))

    @property
    def weights_version(self) -> int:
        """The version of the weights published last (fragments sampled with it are current)."""
        return self._version

    # -- actors ----------------------------------------------------------------------------
    def _group_id(self) -> str | None:
        return self._pg.id.hex() if self._pg is not None else None

    def _take_parked(self, index: int) -> Any:
        """The actor an earlier trainer of this placement group parked in slot ``index``, readied
        for this trainer, or None."""
        group_id = self._group_id()
        parked = PARKED.take(group_id, index) if group_id is not None else None
        if parked is not None:
            parked.configure.remote(**self._kwargs, worker_index=index)  # runs before its next request
            self.reused += 1
        return parked

    def _launch(self, index: int) -> None:
        """Start a new actor in slot ``index`` (tracked while it starts, when starts are limited)."""
        actor = self.actors[index] = self._start_actor(index)
        if self._max_starting is not None:
            self._starting[actor.ready.options(concurrency_group="control").remote()] = index
        if self._streaming:
            self._start_stream(index)

    def _launch_deferred(self, timeout_s: float | None = 0.0) -> None:
        """Start deferred actors in the places of those that came up, waiting up to ``timeout_s``
        (None: no limit) for one to come up when every place is taken."""
        while self._deferred:
            if self._starting:
                up, _ = ray.wait(list(self._starting), num_returns=1, timeout=timeout_s)
                if not up:
                    return
                for ref in up:
                    del self._starting[ref]
            while self._deferred and len(self._starting) < (self._max_starting or 1):
                self._launch(self._deferred.pop(0))
        self._starting.clear()

    def _start_actor(self, index: int) -> Any:
        kwargs = dict(self._kwargs)
        if self.num_restarts and kwargs.get("seed") is not None:
            kwargs["seed"] = kwargs["seed"] + 100_003 * self.num_restarts  # a replacement gets new streams
        self.started += 1
        return start_actor(kwargs, index, self._cpus, self._pg, self._extension.get(index))

    def _replace(self, index: int, error: BaseException) -> None:
        if getattr(error, "_actor_init_failed", False):  # its __init__ raised: a new one would too
            raise RuntimeError(f"rollout worker {index} could not start: {error}") from error
        failures = self._failures.get(index, 0) + 1
        self._failures[index] = failures
        if failures > MAX_CONSECUTIVE_WORKER_FAILURES:
            raise RuntimeError(f"rollout worker {index} died {failures} times in a row; last error: {error}") from error
        logger.warning("rollout worker %d died; starting a replacement (%s)", index, str(error).splitlines()[0][:200])
        kill(self.actors[index])
        self.num_restarts += 1
        self.actors[index] = self._start_actor(index)

    # -- weights ---------------------------------------------------------------------------
    def set_weights(self, weights: Callable[[], Mapping[str, np.ndarray]]) -> None:
        """Publish new weights: one ``ray.put``; requests made from now on carry them."""
        self._version += 1
        if self.actors:
            self._weights_ref = ray.put(dict(weights()))
        for index in self._streams:  # running streams load them between two steps
            self.actors[index].push_weights.options(concurrency_group="control").remote(self._version, [self._weights_ref])

    def foreach(self, fn: Callable[..., Any], args: list[tuple[Any, ...]]) -> list[Any]:
        """``fn(worker, *args[i])`` on worker i (the actors at once; the in-process worker: one
        call, ``args[0]``), results in order; a dead actor is replaced and asked again."""
        if self.local is not None:
            return [self.local.apply(fn, *args[0])]
        indices = sorted(self.actors)[:len(args)]
        refs = {i: self.actors[i].apply.remote(fn, *a) for i, a in zip(indices, args)}
        results = {}
        while refs:
            i, ref = refs.popitem()
            try:
                results[i] = ray.get(ref)
            except RayActorError as exc:
                self._replace(i, exc)
                refs[i] = self.actors[i].apply.remote(fn, *args[indices.index(i)])
        return [results[i] for i in indices]

    # -- sampling -------------------------------------------------------------------------
    def _submit(self, index: int, num_steps: int) -> None:
        actor = self.actors[index]
        self._last_request = next(_requests)
        ref = actor.sample.remote(num_steps, self._version, [self._weights_ref], self._last_request)
        self._inflight[ref] = (index, actor)

    def _collect(self, num_steps: int, want: int, queue_depth: int) -> list[Fragment]:
        """Fragments as they arrive, until ``want`` of them; a dead actor is replaced and asked again.

        ``queue_depth`` 0: synchronous, nothing is resubmitted; else each actor's queue is kept
        at that many requests."""
        fragments: list[Fragment] = []
        while len(fragments) < want:
            ready, _ = ray.wait(list(self._inflight), num_returns=1)
            ref = ready[0]
            index, actor = self._inflight.pop(ref)
            try:
                fragment = ray.get(ref)  # never an aborted one: only stop() aborts, and after it nothing waits
            except RayActorError as exc:
                if self.actors.get(index) is not actor:
                    continue  # another request of an actor already replaced
                self._replace(index, exc)
                for _ in range(max(1, queue_depth)):
                    self._submit(index, num_steps)
                continue
            self._received(index, fragment)
            fragments.append(fragment)
            if queue_depth and self.actors.get(index) is actor:
                self._submit(index, num_steps)
        return fragments

    def sample(
        self, num_steps: int, num_fragments: int, asynchronous: bool, requests_per_worker: int = 1
    ) -> list[Fragment]:
        """``num_fragments`` fragments of ``num_steps`` vector steps each.

        Synchronous: every actor samples one fragment with the current weights; the call returns
        when all have arrived. Asynchronous: every actor always has ``requests_per_worker``
        requests queued; the first ``num_fragments`` fragments to arrive are taken and their
        actors asked for another at once (with the weights published last), so a slow
        environment delays only its own fragments. With 2 requests queued, an actor that
        finishes while the learner learns starts its next fragment at once instead of waiting
        to be asked (RLlib's APPO default), at the price of fragments one more iteration's
        weights behind; the learner corrects for the weights a fragment was sampled with.
        """
        if self.local is not None:
            return [self.local.sample(num_steps) for _ in range(num_fragments)]
        orphans, self._orphans = self._orphans, []
        while self._deferred:  # requests go to every actor: none waits for another's start
            self._launch(self._deferred.pop(0))
        self._starting.clear()
        if asynchronous:
            queued = Counter(index for index, _ in self._inflight.values())
            for index in self.actors:
                for _ in range(requests_per_worker - queued[index]):
                    self._submit(index, num_steps)
            want = max(num_fragments - len(orphans), 0)
            return orphans + self._collect(num_steps, want, queue_depth=requests_per_worker)
        for index in self.actors:
            self._submit(index, num_steps)
        return orphans + self._collect(num_steps, len(self.actors), queue_depth=0)

    # -- streaming ----------------------------------------------------------------------------
    def stream(self, min_slots: int) -> list[Fragment]:
        """Fragments holding at least ``min_slots`` env steps (reset steps included, as in
        :meth:`sample`), taken from actors that sample without pause (``RolloutWorker.stream``).

        No env ever waits: not for a slow env of another actor (lock-step sampling's loss), nor
        for the learner (the actors keep sampling while it learns, and load the new weights
        between two steps as soon as they arrive, so only the steps sampled meanwhile are one
        version behind). The learner takes every actor's steps when the total should have
        reached part of ``min_slots`` (judged from the rate of the last takes), then again for
        the rest (see ``stream_batches.aim``). A batch holds ``min_slots`` env steps or a few more,
        however unevenly the envs stepped: steps beyond that wait for the next batch (``cut``);
        with ``whole_takes`` (a replay buffer's) a batch is everything taken."""
        self.start_streams()
        carried, self._carry = self._carry, []
        fresh: list[Fragment] = []
        slots = sum(f.slots for f in carried)
        took = False
        while not took or slots < min_slots:  # a take every batch, so no backlog builds up in the actors
            took = True
            self._launch_deferred()
            self._check_streams()
            if slots < min_slots:
                time.sleep(self._wait_for(aim(min_slots - slots, min_slots, len(self.actors))))
            slots += self._take_all(fresh)
        if self.whole_takes:
            batch = carried + fresh
        else:
            batch, self._carry = cut(carried, fresh, min_slots)
        self._bound_streams()
        return batch

    def _wait_for(self, slots: int) -> float:
        """Seconds until the streams should hold ``slots`` more steps than at the last take."""
        if not self._rate:
            return 0.1  # no rate yet (the actors are starting): look again soon
        return max(0.0, slots / self._rate - (time.perf_counter() - self._last_take))

    def _take_all(self, fragments: list[Fragment]) -> int:
        """Take every actor's steps into ``fragments`` (replacing a dead actor); returns how many.

        An actor still starting (a new one, or one that grew the trainer) answers once it is up,
        a second or more later: its take is left in flight for the next round instead of holding
        up the batch, so the actors already sampling are never made to wait for it (their streams
        would stop at their bound meanwhile)."""
        now = time.perf_counter()
        takes = {}
        for index, actor in self.actors.items():
            ref = self._pending_take.pop(index, None)
            takes[ref if ref is not None else actor.take.options(concurrency_group="control").remote()] = (index, actor)
        starting = [ref for ref, (index, _) in takes.items() if index not in self._up]
        if starting:
            answered, _ = ray.wait(starting, num_returns=len(starting), timeout=0)
            for ref in set(starting) - set(answered):
                index, _ = takes.pop(ref)
                self._pending_take[index] = ref
        taken = 0
        for ref, (index, actor) in takes.items():
            try:
                fragment = ray.get(ref)
            except RayActorError as exc:
                if self.actors.get(index) is actor:
                    self._replace_stream(index, exc)
                continue
            self._up.add(index)
            for one in as_fragments(fragment):  # an actor with env_threads gives one per env
                self._received(index, one)
                taken += one.slots
                fragments.append(one)
        if taken and self._last_take:  # smoothed: a few slow steps make one interval's count noisy
            rate = taken / max(now - self._last_take, 1e-3)
            self._rate = rate if self._rate is None else 0.7 * self._rate + 0.3 * rate
        self._last_take = now
        return taken

    def start_streams(self) -> None:
        """Start every actor's stream that is not running (with the weights published last); an
        actor started later streams from its start."""
        self._streaming = True
        for index in self.actors:
            if index not in self._streams:
                self._start_stream(index)

    def wait_until_up(self, timeout_s: float) -> float:
        """Block until every actor is built (or ``timeout_s`` passed), starting the deferred ones
        as places free up; returns the seconds waited. A failed actor counts as up: its error
        surfaces with its first fragment. Deferred actors left at the timeout start as the
        streams run (:meth:`stream`)."""
        start = time.perf_counter()
        deadline = start + timeout_s
        while self._deferred and time.perf_counter() < deadline:
            self._launch_deferred(timeout_s=max(deadline - time.perf_counter(), 0.0))
        if self.actors:
            refs = {actor.ready.options(concurrency_group="control").remote(): index for index, actor in self.actors.items()}
            up, _ = ray.wait(list(refs), num_returns=len(refs), timeout=max(deadline - time.perf_counter(), 0.0))
            self._up.update(refs[ref] for ref in up)  # their first take is waited for (see _take_all)
        if self.start_s is None:  # the first actors sampled meanwhile, but the start lasted until now
            self.start_s = time.perf_counter() - self.created_at
        return time.perf_counter() - start

    @property
    def backlog_steps(self) -> int:
        """Env steps (reset steps included) taken from the streams but left for the next batch."""
        return sum(f.slots for f in self._carry)

    def pause(self) -> None:
        """Stop the streams; the actors stay, idle, with what they sampled, until the next
        :meth:`stream` starts them again."""
        for index in list(self._streams):
            self.actors[index].abort.options(concurrency_group="control").remote(self._last_request)
        self._streams.clear()
        self._streaming = False

    def _start_stream(self, index: int) -> None:
        self._last_request = self._stream_request[index] = next(_requests)
        self._streams[index] = self.actors[index].stream.remote(self._version, [self._weights_ref], self._last_request,
                                                                self._max_ahead())
        self._bound_sent = None  # a stream started with its own: tell them all at the next batch

    def _max_ahead(self) -> int | None:
        """A stream's bound on its untaken steps (see ``RolloutWorker.stream``), in steps of all
        its envs at once: its share of twice ``stream_ahead`` env steps less those left over for
        the next batch, and one step more. Everything sampled and not yet learnt from, in the
        actors and here, stays under two batches however slow the learner; twice, so that an
        actor whose env runs faster than the others' can sample on while they fill the batch."""
        if self.stream_ahead is None:
            return None
        room = max(2 * self.stream_ahead - self.backlog_steps, 0)
        return math.ceil(room / (max(self.num_workers, 1) * self._kwargs["num_envs"])) + 1

    def _bound_streams(self) -> None:
        """Tell the running streams their bound after a batch (the leftover changed it)."""
        if self.stream_ahead is None:
            return
        bound = self._max_ahead()
        if bound == self._bound_sent:  # a learner that keeps pace leaves it alone: no call per batch
            return
        self._bound_sent = bound
        for index in self._streams:
            self.actors[index].set_max_ahead.options(concurrency_group="control").remote(bound)

    def _replace_stream(self, index: int, error: BaseException) -> None:
        self._streams.pop(index, None)
        self._pending_take.pop(index, None)  # asked of the dead actor
        self._up.discard(index)
        self._replace(index, error)
        self._start_stream(index)

    def _check_streams(self) -> None:
        """A stream only ends when aborted: one that ended raised (its error is the trial's) or
        lost its actor (replaced)."""
        ended, _ = ray.wait(list(self._streams.values()), num_returns=len(self._streams), timeout=0)
        for ref in ended:
            index = next(i for i, r in self._streams.items() if r == ref)
            try:
                ray.get(ref)
            except RayActorError as exc:
                self._replace_stream(index, exc)
                continue
            raise RuntimeError(f"rollout worker {index}: its stream ended without being stopped")

    def _received(self, index: int, fragment: Fragment) -> None:
        if self.start_s is None:
            self.start_s = time.perf_counter() - self.created_at - fragment.sample_time_s
        self._failures.pop(index, None)
        self._taken_slots[index] += fragment.slots
        if fragment.node is not None:
            self.nodes[index] = fragment.node

    def stop(self) -> None:
        """Park the actors for the next trainer of this placement group, their requests aborted
        (kill them outside a placement group)."""
        if self.local is not None:
            self.local.close()
        group_id = self._group_id()
        for index, actor in self.actors.items():
            if group_id is None or index in self._extension:  # an extension's group goes with the trial
                kill(actor)
                continue
            if self._inflight or self._streams:
                actor.abort.options(concurrency_group="control").remote(self._last_request)
            PARKED.park(group_id, index, actor)
        # Deferred actors never started: the next trainer of this group starts them.
        for held in (self.actors, self._inflight, self._streams, self._pending_take, self._up, self._deferred,
                     self._starting, self._extension):
            held.clear()
        self._streaming = False
        self.num_workers = self.base_workers

    # -- elastic ---------------------------------------------------------------------------------
    def resize(self, groups: list[Any]) -> tuple[int, int]:
        """Run ``base_workers + len(groups)`` actors, actor ``base_workers + 1 + i`` in ``groups[i]``
        (bundle 0). New actors start (and stream, when streams run); actors past the new count are
        let go without losing a sampled step (see the module's docstring). Returns (started, let go)."""
        if self.local is not None:
            raise ValueError("resize: this trainer samples in the learner's process (num_workers=0)")
        target = self.base_workers + len(groups)
        started = retired = 0
        for index in sorted(i for i in list(self.actors) + self._deferred if i > target):
            if index in self._deferred:
                self._deferred.remove(index)
            else:
                self._retire(index)
            self._extension.pop(index, None)
            retired += 1
        for i, group in enumerate(groups):
            index = self.base_workers + 1 + i
            if not same_group(self._extension.get(index), group) and index in self.actors:
                self._retire(index)  # its group changed under it: start again in the new one
                retired += 1
            self._extension[index] = group
            if index not in self.actors and index not in self._deferred:
                self._launch(index)
                started += 1
        self.num_workers = target
        return started, retired

    def _carry_over(self, index: int, taken: Fragment | list[Fragment] | None) -> None:
        """What a retiring actor sampled goes into the next batch."""
        for one in as_fragments(taken):
            self._received(index, one)
            self._carry.append(one)

    def _retire(self, index: int) -> None:
        """Let actor ``index`` go: its stream stopped between two steps and everything it sampled
        kept for the next batch (or its requests in flight waited for), then the actor killed."""
        actor = self.actors.pop(index)
        self._up.discard(index)
        pending = self._pending_take.pop(index, None)  # asked while it started: its steps come first
        if pending is not None:
            try:
                self._carry_over(index, ray.get(pending))
            except RayActorError:
                pass
        stream = self._streams.pop(index, None)
        if stream is not None:
            actor.abort.options(concurrency_group="control").remote(self._stream_request.pop(index))
            try:
                ray.get(stream)
                rest = ray.get(actor.take.options(concurrency_group="control").remote())
            except RayActorError:  # died meanwhile: nothing more to take
                rest = None
            self._carry_over(index, rest)
        for ref, (other, _) in list(self._inflight.items()):
            if other == index:
                del self._inflight[ref]
                try:
                    fragment = ray.get(ref)
                except RayActorError:
                    continue
                if fragment is not None:
                    self._received(index, fragment)
                    self._orphans.append(fragment)
        try:
            sampled = int(ray.get(actor.slots_sampled.options(concurrency_group="control").remote()))
        except RayActorError:
            sampled = -1
        self.retired.append((index, sampled, self._taken_slots.pop(index, 0)))
        kill(actor)
