"""What the off-policy population learners (packed DQN and SAC trials) share: each member's replay
buffer and n-step windows, the iteration's rounds, and a member's joining and config.

A population learner trains P members of one trainer at once in one process
(``algorithms/dqn/population.py``, ``algorithms/sac/population.py``): their networks stacked
(``algorithms/models/stacked.py``), their envs stepped together
(``algorithms/sampling/population_envs.py``). An iteration is the off-policy trainer's
(``algorithms/core/off_policy.py``) for every member at once: rounds of ``train_freq`` env steps
(``ceil(train_freq / num_envs_per_worker)`` vector steps of each member's envs) into each member's
own replay buffer (n-step transitions with its own gamma), then, for the members whose buffer holds
``num_steps_sampled_before_learning_starts`` transitions, ``gradient_steps`` updates on their own
minibatches, then :meth:`after_round`, until each has sampled ``min_sample_timesteps_per_iteration``
env steps. Members never mix: a member's loss reads its own rows only.

The networks, their optimisers and the updates live on the pack's device (CUDA when the pack's
trials ask ``num_gpus_for_learner``, a signature key: the pack's process then holds one GPU for all
its members); envs and replay buffers stay in host memory, and a minibatch goes to the device
once per update, every member's at once.

A subclass gives its signature and per-member keys, its networks (:meth:`build_networks`,
:meth:`reset_networks`), how it acts (:meth:`act`) and one update (:meth:`update`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping, Sequence

import gymnasium as gym
import numpy as np

from algorithms.core.learner_config import learner_device
from algorithms.core.packed_member import shape_value
from algorithms.data.replay_buffer import NStepTransitions, ReplayBuffer
from algorithms.sampling.fragment import Fragment
from algorithms.sampling.population_envs import PopulationEnvs

F32 = np.float32

__all__ = ["OffPolicyPopulation"]


class OffPolicyPopulation:
    """An off-policy trainer for every member of a pack at once (see the module docstring)."""

    #: The trainer's name, in errors.
    what: ClassVar[str]
    #: Keys every member of a pack shares (they fix the arrays' shapes and the iteration's cadence).
    signature: ClassVar[dict[str, Any]]
    #: Keys each member has its own value of.
    per_member: ClassVar[dict[str, Any]]
    #: The action space's kind the trainer takes.
    actions: ClassVar[type[gym.Space]] = gym.spaces.Discrete
    #: The statistics an update returns per member, averaged into its result.
    stat_keys: ClassVar[tuple[str, ...]]

    def __init__(self, configs: Sequence[Mapping[str, Any]]) -> None:
        self.members = self.check_pack(configs)
        first = self.members[0]
        self.P, self.N = len(self.members), int(first["num_envs_per_worker"])
        self.envs = PopulationEnvs(self.members, self.N, self.what, actions=self.actions)
        self.obs_space: gym.spaces.Box = self.envs.observation_space  # a Box: PopulationEnvs checked it
        self.act_space = self.envs.action_space
        self.device = learner_device(first["num_gpus_for_learner"])
        self.build_networks()
        self.buffers = [self._new_buffer() for _ in range(self.P)]
        self.assemble = [NStepTransitions(float(m["gamma"]), int(m["n_step"])) for m in self.members]
        self.replay_rngs = [np.random.default_rng([int(m["seed"]), 2]) for m in self.members]
        self.act_rng = np.random.default_rng([int(first["seed"]), self.P, 1])
        self.num_updates = np.zeros(self.P, dtype=np.int64)

    @classmethod
    def check_pack(cls, configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The members' configs with the defaults filled in; a ValueError naming ``pack_trials``
        when they cannot be one pack (no member, an unknown key, a signature key that differs)."""
        if not configs:
            raise ValueError("pack_trials: a pack needs at least one member")
        allowed = set(cls.signature) | set(cls.per_member)
        members = []
        for config in configs:
            unknown = sorted(set(config) - allowed)
            if unknown:
                raise ValueError(f"pack_trials: a packed {cls.what} member takes the keys {sorted(allowed)}; got {unknown}")
            member = {**cls.signature, **cls.per_member, **config}
            if member["max_grad_norm"] is None:  # off
                member["max_grad_norm"] = math.inf
            cls.check_member(member)
            members.append(member)
        for key in cls.signature:
            values = {shape_value(m[key]) for m in members}
            if len(values) > 1:
                raise ValueError(f"pack_trials: members of a pack share {key!r} (it fixes the arrays' shapes); "
                                 f"got {sorted(values)}")
        if members[0]["env"] is None:
            raise ValueError("pack_trials: config key 'env' is required")
        return members

    # -- what a subclass gives ----------------------------------------------------------------------
    @classmethod
    def check_member(cls, member: Mapping[str, Any]) -> None:
        """A ValueError naming the key for a member's value the trainer would refuse."""

    def build_networks(self) -> None:
        """Every member's networks and optimisers, each drawn from its member's seed."""
        raise NotImplementedError

    def reset_networks(self, m: int) -> None:
        """Member ``m``'s networks drawn anew from its seed, its optimisers without state."""
        raise NotImplementedError

    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        """(shape, dtype) of one action in the replay buffer."""
        raise NotImplementedError

    def begin_round(self) -> None:
        """Before a round's steps (exploration that follows each member's env steps)."""

    def act(self, obs: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The exploring actions of ``members`` (the learning ones) for their ``obs``
        ``[len(members), N, obs_dim]``, spread over the pack (:meth:`spread`): as the replay buffer
        keeps them ``[P, N, ...]``, and as the envs take them."""
        raise NotImplementedError

    def update(self, members: list[int]) -> dict[str, np.ndarray]:
        """One update of each of ``members`` on its own minibatch (:meth:`replayed`); per member
        its :attr:`stat_keys`."""
        raise NotImplementedError

    def after_round(self, members: list[int]) -> None:
        """After a round's updates (target networks that follow their own cadence)."""

    def result_extras(self, m: int) -> dict[str, Any]:
        """Member ``m``'s result keys of the trainer's own."""
        return {}

    def finite(self, m: int) -> bool:
        """Whether member ``m``'s parameters are all finite."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------------
    def _new_buffer(self) -> ReplayBuffer:
        shape, dtype = self.action_spec()
        return ReplayBuffer(int(self.members[0]["replay_buffer_config"]["capacity"]), self.obs_space, shape, dtype)

    @property
    def env_steps(self) -> np.ndarray:
        return self.envs.env_steps

    def hyper(self, key: str) -> np.ndarray:
        """The members' values of a numeric per-member key, as a ``[P, 1]`` float32 column."""
        return np.array([[float(m[key])] for m in self.members], dtype=F32)

    def replayed(self, members: list[int]) -> dict[str, Any]:
        """A minibatch of each of ``members`` from its own buffer, stacked ``[members, B, ...]``
        (tensors on the device)."""
        import torch

        B = int(self.members[0]["train_batch_size"])
        draws = [self.buffers[m].sample(B, self.replay_rngs[m]) for m in members]
        return {key: torch.from_numpy(np.stack([d[key] for d in draws])).to(self.device)
                for key in ("obs", "actions", "rewards", "next_obs", "discounts")}

    def acting(self, stack: Any, members: np.ndarray) -> tuple[Any, dict[str, Any]]:
        """``stack``'s parameters and buffers of ``members``, to act with (the whole stack's when
        every member acts; a member that does not learn now costs no forward pass)."""
        if len(members) == self.P:
            return stack.theta, stack.acting_buffers()
        return stack.theta[list(members)], stack.acting_buffers(members)

    def spread(self, values: np.ndarray, members: np.ndarray) -> np.ndarray:
        """``values`` of ``members`` ``[len(members), ...]`` as the pack's ``[P, ...]`` (zeros for
        the others: their envs wait, or step uncounted in a pack-wide vector env)."""
        if len(members) == self.P:
            return values
        out = np.zeros((self.P, *values.shape[1:]), dtype=values.dtype)
        out[members] = values
        return out

    def column(self, key: str, members: Sequence[int]) -> Any:
        """:meth:`hyper` of ``members``, a ``[len(members), 1]`` tensor on the device."""
        import torch

        return torch.from_numpy(self.hyper(key)[list(members)]).to(self.device)

    def on_device(self, array: np.ndarray) -> Any:
        """``array`` as a tensor on the device (shared memory on the CPU)."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def _sample_round(self, vector_steps: int) -> np.ndarray:
        """``vector_steps`` steps of every member's envs, each learning member's transitions into
        its buffer; the transitions each member got ``[P]``."""
        P, N, T = self.P, self.N, vector_steps
        self.begin_round()
        rows: dict[str, Any] = {"obs": np.empty((T, P, N, self.envs.obs_dim), dtype=F32), "actions": None,
                                "rewards": np.empty((T, P, N), dtype=F32),
                                **{k: np.empty((T, P, N), dtype=bool) for k in ("terminated", "truncated", "valid")}}
        members = np.flatnonzero(self.envs.learning)
        for t in range(T):
            rows["obs"][t] = self.envs.obs
            stored, env_actions = self.act(self.envs.obs if len(members) == P else self.envs.obs[members], members)
            if rows["actions"] is None:
                rows["actions"] = np.empty((T, *stored.shape), dtype=stored.dtype)
            rows["actions"][t] = stored
            step = self.envs.step(env_actions)
            rows["rewards"][t], rows["terminated"][t], rows["valid"][t] = step["rewards"], step["terminated"], step["valid"]
            rows["truncated"][t] = step["done"] & ~step["terminated"]
        zeros = np.zeros((T, N), dtype=F32)
        for m in np.flatnonzero(self.envs.learning):
            fragment = Fragment(obs=rows["obs"][:, m], actions=rows["actions"][:, m], logp=zeros, values=zeros,
                                rewards=rows["rewards"][:, m], terminated=rows["terminated"][:, m],
                                truncated=rows["truncated"][:, m], valid=rows["valid"][:, m],
                                last_obs=self.envs.obs[m].copy(), last_values=None,
                                episode_returns=np.zeros(0), episode_lens=np.zeros(0, dtype=np.int64))
            self.buffers[m].add(self.assemble[m](fragment))
        return rows["valid"].sum(axis=(0, 2))

    def train(self, learning: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """One iteration of every member, or of the members ``learning`` only (the others' envs
        step on, but nothing of it is theirs: their state stays as it was): a result per learning
        member, the trainer's keys, in order. A member whose losses or parameters are no longer
        finite has ``"error"`` in its result."""
        chosen = list(range(self.P)) if learning is None else sorted(int(m) for m in learning)
        self.envs.learning = np.zeros(self.P, dtype=bool)
        self.envs.learning[chosen] = True
        sums, updates = self._iterate(chosen)
        results = []
        for m in chosen:
            means = {key: float(sums[key][m] / updates[m]) if updates[m] else math.nan for key in self.stat_keys}
            result: dict[str, Any] = {
                **self.envs.episode_stats(m), **means, "cur_lr": float(self.members[m]["lr"]),
                **self.result_extras(m), "num_updates": int(self.num_updates[m]), "replay_size": len(self.buffers[m]),
                "num_sgd_updates": int(updates[m]), "members_learning": len(chosen)}
            if m in self.envs.errors:
                result["error"] = f"member {m}'s env raised:\n{self.envs.errors.pop(m)}"
            elif updates[m] and not (all(math.isfinite(v) for v in means.values()) and self.finite(m)):
                result["error"] = (f"member {m}'s losses or parameters are not finite (lr {self.members[m]['lr']!r}): "
                                   f"{means}")
            results.append(result)
        return results

    def _iterate(self, chosen: list[int]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The rounds of one iteration of ``chosen``: the sums of their update statistics and
        their update counts."""
        c = self.members[0]
        per_round = math.ceil(int(c["train_freq"]) / self.N)
        starts = max(1, int(c["num_steps_sampled_before_learning_starts"]))
        sampled = np.zeros(self.P, dtype=np.int64)
        sums = {key: np.zeros(self.P) for key in self.stat_keys}
        updates = np.zeros(self.P, dtype=np.int64)
        with np.errstate(all="ignore"):  # a member that diverges is told by name in its result
            while sampled[chosen].min() < int(c["min_sample_timesteps_per_iteration"]):
                sampled += self._sample_round(per_round)
                ready = [m for m in chosen if len(self.buffers[m]) >= starts]
                for _ in range(int(c["gradient_steps"]) if ready else 0):
                    for key, values in self.update(ready).items():
                        sums[key][ready] += values
                    updates[ready] += 1
                    self.num_updates[ready] += 1
                self.after_round(chosen)
        return sums, updates

    # -- one member: joining, its config ------------------------------------------------------------
    def join(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` starts anew as a trial of ``config`` (its signature the pack's): fresh
        networks from its seed, an empty buffer, no optimiser state, no env steps."""
        self.members[m] = self.check_pack([{**config, **{k: self.members[m][k] for k in self.signature}}])[0]
        self.reset_networks(m)
        self.buffers[m] = self._new_buffer()
        self.assemble[m] = NStepTransitions(float(self.members[m]["gamma"]), int(self.members[m]["n_step"]))
        self.replay_rngs[m] = np.random.default_rng([int(self.members[m]["seed"]), 2])
        self.num_updates[m] = 0
        self.envs.join(m)

    def configure(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` learns on with ``config``'s per-member hyperparameters (its signature the
        pack's); a new gamma starts its n-step windows anew, as the trainer's does."""
        self.members[m] = self.check_pack([{**{k: v for k, v in config.items() if k in self.per_member},
                                            **{k: self.members[m][k] for k in self.signature}}])[0]
        if self.assemble[m].gamma != float(self.members[m]["gamma"]):
            self.assemble[m] = NStepTransitions(float(self.members[m]["gamma"]), int(self.members[m]["n_step"]))

    def restart_counts(self, m: int, env_steps: int, episodes_total: int, episodes: Sequence[tuple[float, int]]) -> None:
        self.envs.restart_counts(m, env_steps, episodes_total, episodes)

    def load_replay_state(self, m: int, learner: Mapping[str, Any]) -> None:
        """Member ``m``'s replay from a checkpoint's learner state: its generator, update count and
        buffer (empty unless an unpacked trial kept it); its n-step windows start anew."""
        self.replay_rngs[m].bit_generator.state = learner["replay_rng"]
        self.num_updates[m] = int(learner["num_updates"])
        buffer = self.buffers[m]
        buffer.clear()
        if learner.get("buffer") is not None:
            buffer.load_state({key: value.numpy() if hasattr(value, "numpy") else value
                               for key, value in learner["buffer"].items()})
        self.assemble[m].reset()

    def stop(self) -> None:
        self.envs.stop()
