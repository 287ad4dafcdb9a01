"""What crosses from sampling to learning: a :class:`Fragment` from a rollout worker, a
:class:`TrainBatch` for an on-policy learner, and the :class:`RolloutPolicy` a worker acts with.

A fragment is what one rollout worker sampled in one go: (time, env) arrays, time-major, as the
envs produced them, the observation after the last step, and the episodes that ended in it. A
learner never changes one: what it recomputes (values with its current weights, a bootstrap value)
makes a new fragment (:meth:`Fragment.replace`). On-policy trainers turn fragments into a flat
:class:`TrainBatch` of the real transitions (PPO's GAE: ``algorithms.data.gae.compute_gae``); off-policy
trainers put their transitions into a replay buffer (``algorithms.data.replay_buffer``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from algorithms.data.observations import Obs, concat, index

__all__ = ["Fragment", "RecordsActionValues", "RolloutPolicy", "TIME_MAJOR", "TrainBatch", "concat_batches"]

#: The fields of a fragment that hold one row per vector step.
TIME_MAJOR = ("obs", "actions", "logp", "values", "rewards", "terminated", "truncated", "valid", "weights_versions",
              "action_values")


@dataclasses.dataclass(frozen=True, eq=False)
class Fragment:
    """``T`` vector steps of ``N`` envs, sampled by one rollout worker.

    ``valid`` is False at the NEXT_STEP autoreset steps (no transition of the MDP; see
    ``algorithms.sampling.rollout_worker``). ``last_values`` is V(``last_obs``), the bootstrap at the fragment's
    end, or None where the learner computes it (a streamed fragment). ``weights_version`` is the
    version of the weights it was sampled with (the oldest, for a stream; None: the learner's own
    policy, in its process), ``weights_versions`` each step's for a stream.
    """

    obs: Obs  # (T, N, *obs_shape), in the env's dtype; a dict / tuple of such for Dict / Tuple spaces
    actions: np.ndarray  # (T, N, *action_shape)
    logp: np.ndarray  # (T, N): the behaviour policy's log-probability of each action
    values: np.ndarray  # (T, N): V(obs) at sampling time
    rewards: np.ndarray  # (T, N)
    terminated: np.ndarray  # (T, N) bool
    truncated: np.ndarray  # (T, N) bool
    valid: np.ndarray  # (T, N) bool
    last_obs: Obs  # (N, *obs_shape): the observation after the last step
    last_values: np.ndarray | None  # (N,)
    episode_returns: np.ndarray  # the episodes that ended in the fragment, in order of completion
    episode_lens: np.ndarray
    sample_time_s: float = 0.0
    weights_version: int | None = None
    weights_versions: np.ndarray | None = None  # (T,)
    worker_index: int = 0
    node: str | None = None
    #: The normalisation statistics counted while sampling it (``algorithms/data/normalization.py``), or None.
    filter_delta: Mapping[str, Any] | None = None
    #: (T, N): Q(obs, action) of the sampling policy, from a Q policy that records them (Ape-X's
    #: actors, for their transitions' first priorities: ``RecordsActionValues``); else None.
    action_values: np.ndarray | None = None

    @property
    def num_steps(self) -> int:
        """T, the vector steps."""
        return len(self.valid)

    @property
    def slots(self) -> int:
        """T x N, reset steps included."""
        return int(self.valid.size)

    @property
    def env_steps(self) -> int:
        """The transitions (valid steps)."""
        return int(self.valid.sum())

    def replace(self, **changes: Any) -> Fragment:
        """A copy with ``changes`` (the arrays are shared, not copied)."""
        return dataclasses.replace(self, **changes)

    def split(self, t: int) -> tuple[Fragment, Fragment]:
        """The fragment cut before step ``t``: the steps before it and those from it on (the first
        bootstraps from the observation at ``t``; an episode goes with the part its last step is in;
        the sampling time is shared out by steps). Both need their bootstrap value computed."""
        T = self.num_steps
        if not 0 < t < T:
            raise ValueError(f"a fragment of {T} steps can only be cut inside, got t={t}")
        head: dict[str, Any] = {}
        tail: dict[str, Any] = {}
        for key in TIME_MAJOR:
            rows = getattr(self, key)
            head[key], tail[key] = (None, None) if rows is None else (index(rows, slice(None, t)), index(rows, slice(t, None)))
        ended_before = int((np.nonzero(self.terminated | self.truncated)[0] < t).sum())  # in order of completion
        for key in ("episode_returns", "episode_lens"):
            rows = getattr(self, key)
            head[key], tail[key] = rows[:ended_before], rows[ended_before:]
        head_time = self.sample_time_s * t / T
        versions = (head["weights_versions"], tail["weights_versions"])
        first = self.replace(**head, last_obs=index(self.obs, t), last_values=None, sample_time_s=head_time,
                             weights_version=self.weights_version if versions[0] is None else int(versions[0].min()))
        second = self.replace(**tail, last_values=None, sample_time_s=self.sample_time_s - head_time, filter_delta=None,
                              weights_version=self.weights_version if versions[1] is None else int(versions[1].min()))
        return first, second


@dataclasses.dataclass(frozen=True, eq=False)
class TrainBatch:
    """The real transitions of some fragments, flat, with what an on-policy learner needs:
    advantages and value targets (``returns``), each transition's importance weight (1 unless it
    was sampled with older weights), and the counts of what went into it."""

    obs: Obs  # (n, *obs_shape), in the env's dtype
    actions: np.ndarray  # (n, *action_shape)
    logp: np.ndarray  # (n,): the log-probabilities the update's ratio is taken against
    values: np.ndarray  # (n,)
    advantages: np.ndarray  # (n,)
    returns: np.ndarray  # (n,): value targets
    is_weight: np.ndarray  # (n,)
    episode_returns: np.ndarray
    episode_lens: np.ndarray
    env_steps: int
    slots: int
    stale_steps: int = 0

    def replace(self, **changes: Any) -> TrainBatch:
        return dataclasses.replace(self, **changes)


def as_fragments(taken: Fragment | list[Fragment] | None) -> list[Fragment]:
    """What a rollout actor's take returned, as a list (None: nothing; a list: an actor's env
    threads' fragments, one each)."""
    if taken is None:
        return []
    return taken if isinstance(taken, list) else [taken]


def concat_batches(batches: Sequence[TrainBatch]) -> TrainBatch:
    """One batch of many: arrays concatenated, counts summed."""
    if len(batches) == 1:
        return batches[0]
    arrays: dict[str, Any] = {f.name: concat([getattr(b, f.name) for b in batches]) for f in dataclasses.fields(TrainBatch)
                              if f.name not in ("env_steps", "slots", "stale_steps")}
    return TrainBatch(**arrays, env_steps=sum(b.env_steps for b in batches), slots=sum(b.slots for b in batches),
                      stale_steps=sum(b.stale_steps for b in batches))


class RecordsActionValues(Protocol):
    """A rollout policy that also keeps ``action_values``, Q(obs, action) of every env for the
    actions its last ``act`` chose, when ``record_action_values`` is True: the worker puts them
    in the fragment (Ape-X's actors: ``algorithms/apex/trainer.py``)."""

    record_action_values: bool
    action_values: np.ndarray


class RolloutPolicy(Protocol):
    """What a rollout worker calls on its policy (numpy for the built-in networks, torch for a
    user's module): the actions of every env at once, values for a bootstrap, new weights."""

    def act(self, obs: Obs, rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """(the actions the envs take, the actions as recorded, their log-probabilities, V(obs)),
        for a batch of observations as the envs gave them (the policy reads them its way)."""
        ...

    def value(self, obs: Obs) -> np.ndarray:
        """V(obs), per env."""
        ...

    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Take the learner's weights."""
        ...

    def begin_fragment(self) -> None:
        """A new fragment starts (gSDE draws new exploration noise here; most policies do nothing)."""
        ...
