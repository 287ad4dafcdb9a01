"""DQN for a population of members in one process: the learner of packed DQN trials.

P members, each a DQN agent (double Q, dueling heads, n-step returns; the built-in MLP or a user's
Q module) on a flat Box observation and Discrete actions, train at once. Their Q networks are
stacked copies (``algorithms/models/stacked.py``: one ``torch.func.vmap`` pass acts for all, and
one computes every member's loss), parameters in one flat buffer ``[P, D]`` that a population Adam
steps whole, each member with its own lr and gradient clip
(``algorithms/optim/population_adam.py``); the target networks are a second buffer of that layout.
Each member has its own replay buffer of its own transitions (n-step with its own gamma), its own
epsilon schedule, target-network cadence and tau, double Q or not. Its envs are its own too
(``algorithms/sampling/population_envs.py``: a user's env raising fails its member alone).

An iteration is the DQN trainer's (``algorithms/core/off_policy.py``) for every member at once:
rounds of ``train_freq`` env steps (``ceil(train_freq / num_envs_per_worker)`` vector steps of
each member's envs) into its buffer, then, once it holds
``num_steps_sampled_before_learning_starts`` transitions, ``gradient_steps`` updates on its own
minibatches of ``train_batch_size``, then its target update when due and the epsilon of its env
steps, until it has sampled ``min_sample_timesteps_per_iteration`` env steps. Members never mix:
a member's loss reads its own rows only, so each learns as it would alone.

    pack = PopulationDQN([{"env": "CartPole-v1", "lr": lr, "seed": 0} for lr in (1e-4, 5e-4)])
    results = pack.train()          # one result per member, as a DQN trial reports it
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from algorithms.core.off_policy import schedule_points
from algorithms.core.packed_member import shape_value
from algorithms.data.replay_buffer import NStepTransitions, ReplayBuffer
from algorithms.dqn.trainer import DQN_DEFAULTS, make_q_network
from algorithms.models.stacked import StackedModules
from algorithms.optim.population_adam import PopulationAdam
from algorithms.sampling.fragment import Fragment
from algorithms.sampling.population_envs import PopulationEnvs

#: Keys every member of a pack shares (they fix the arrays' shapes and the iteration's cadence),
#: with DQN's defaults.
SIGNATURE: dict[str, Any] = {
    "env": None, "env_config": {}, "num_envs_per_worker": 1,
    **{key: DQN_DEFAULTS[key] for key in ("train_batch_size", "train_freq", "gradient_steps",
                                          "min_sample_timesteps_per_iteration", "num_steps_sampled_before_learning_starts",
                                          "replay_buffer_config", "n_step", "hidden_sizes", "activation", "dueling")},
    "model": None, "model_config": {}}
#: Keys each member has its own value of, with DQN's defaults.
PER_MEMBER: dict[str, Any] = {key: DQN_DEFAULTS[key] for key in ("lr", "gamma", "epsilon", "target_network_update_freq",
                                                                  "tau", "double_q", "max_grad_norm")} | {"seed": 0}
F32 = np.float32


def check_pack(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The members' configs with the defaults filled in; a ValueError naming ``pack_trials`` when
    they cannot be one pack (no member, an unknown key, a signature key that differs)."""
    if not configs:
        raise ValueError("pack_trials: a pack needs at least one member")
    allowed = set(SIGNATURE) | set(PER_MEMBER)
    members = []
    for config in configs:
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ValueError(f"pack_trials: a packed DQN member takes the keys {sorted(allowed)}; got {unknown}")
        member = {**SIGNATURE, **PER_MEMBER, **config}
        if member["max_grad_norm"] is None:  # off
            member["max_grad_norm"] = math.inf
        schedule_points(member["epsilon"], "epsilon")
        members.append(member)
    for key in SIGNATURE:
        values = {shape_value(m[key]) for m in members}
        if len(values) > 1:
            raise ValueError(f"pack_trials: members of a pack share {key!r} (it fixes the arrays' shapes); "
                             f"got {sorted(values)}")
    if members[0]["env"] is None:
        raise ValueError("pack_trials: config key 'env' is required")
    return members


def build_q(member: Mapping[str, Any], obs_space: Any, act_space: Any) -> Any:
    """Member's Q network, drawn from its seed as the DQN trainer draws it (torch's global
    generator forked)."""
    import torch

    from algorithms.dqn.trainer import build_q_module

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(member["seed"]))
        if member["model"] is not None:
            return build_q_module(member["model"], dict(member["model_config"]), obs_space, act_space)
        return make_q_network(int(np.prod(obs_space.shape)), int(act_space.n), list(member["hidden_sizes"]),
                              member["activation"], bool(member["dueling"]))


class PopulationDQN:
    """DQN trained for every member of a pack at once (see the module docstring)."""

    def __init__(self, configs: Sequence[Mapping[str, Any]]) -> None:
        self.members = check_pack(configs)
        first = self.members[0]
        self.P, self.N = len(self.members), int(first["num_envs_per_worker"])
        self.envs = PopulationEnvs(self.members, self.N, "DQN")
        self.obs_space, self.act_space = self.envs.observation_space, self.envs.action_space
        self.q = StackedModules([build_q(m, self.obs_space, self.act_space) for m in self.members])
        self.target = self.q.flat.copy()
        self.grad = np.zeros_like(self.q.flat)
        self.adam = PopulationAdam(self.P, self.q.flat.shape[1])
        self.buffers = [self._new_buffer() for _ in range(self.P)]
        self.assemble = [NStepTransitions(float(m["gamma"]), int(m["n_step"])) for m in self.members]
        self.replay_rngs = [np.random.default_rng([int(m["seed"]), 2]) for m in self.members]
        self.act_rng = np.random.default_rng([int(first["seed"]), self.P, 1])
        self.last_target_update = np.zeros(self.P, dtype=np.int64)
        self.num_updates = np.zeros(self.P, dtype=np.int64)

    def _new_buffer(self) -> ReplayBuffer:
        return ReplayBuffer(int(self.members[0]["replay_buffer_config"]["capacity"]), self.obs_space, (), np.int64)

    @property
    def env_steps(self) -> np.ndarray:
        return self.envs.env_steps

    def hyper(self, key: str) -> np.ndarray:
        """The members' values of a numeric :data:`PER_MEMBER` key, as a ``[P, 1]`` float32 column."""
        return np.array([[float(m[key])] for m in self.members], dtype=F32)

    def epsilons(self) -> np.ndarray:
        """Each member's epsilon at its env steps, ``[P]``."""
        out = np.empty(self.P)
        for m, member in enumerate(self.members):
            steps, values = schedule_points(member["epsilon"], "epsilon")
            out[m] = np.interp(self.env_steps[m], steps, values)
        return out

    # -- sampling -----------------------------------------------------------------------------------
    def _sample_round(self, vector_steps: int) -> np.ndarray:
        """``vector_steps`` steps of every member's envs, epsilon-greedy, each member's transitions
        into its buffer; the transitions each member got ``[P]``."""
        import torch

        P, N, T = self.P, self.N, vector_steps
        rows: dict[str, Any] = {"obs": np.empty((T, P, N, self.envs.obs_dim), dtype=F32),
                                "actions": np.empty((T, P, N), dtype=np.int64),
                                **{k: np.empty((T, P, N), dtype=bool) for k in ("terminated", "truncated", "valid")},
                                "rewards": np.empty((T, P, N), dtype=F32)}
        epsilon = self.epsilons()[:, None]
        for t in range(T):
            rows["obs"][t] = self.envs.obs
            with torch.no_grad():
                q = self.q.call(torch.from_numpy(self.q.flat), self.q.acting_buffers(), torch.from_numpy(self.envs.obs))
            actions = q.numpy().argmax(-1)
            explore = self.act_rng.random((P, N)) < epsilon
            actions = np.where(explore, self.act_rng.integers(0, self.envs.num_actions, (P, N)), actions)
            rows["actions"][t] = actions
            step = self.envs.step(actions)
            rows["rewards"][t], rows["terminated"][t], rows["valid"][t] = step["rewards"], step["terminated"], step["valid"]
            rows["truncated"][t] = step["done"] & ~step["terminated"]
        got = rows["valid"].sum(axis=(0, 2))
        zeros = np.zeros((T, N), dtype=F32)
        for m in np.flatnonzero(self.envs.learning):
            fragment = Fragment(obs=rows["obs"][:, m], actions=rows["actions"][:, m], logp=zeros, values=zeros,
                                rewards=rows["rewards"][:, m], terminated=rows["terminated"][:, m],
                                truncated=rows["truncated"][:, m], valid=rows["valid"][:, m],
                                last_obs=self.envs.obs[m].copy(), last_values=None,
                                episode_returns=np.zeros(0), episode_lens=np.zeros(0, dtype=np.int64))
            self.buffers[m].add(self.assemble[m](fragment))
        return got

    # -- learning -----------------------------------------------------------------------------------
    def update(self, members: list[int]) -> dict[str, np.ndarray]:
        """One gradient step of each of ``members`` on its own minibatch from its own buffer: the
        Huber loss of Q(s, a) to its (double) Q-learning target. Per member: td_loss, q_mean."""
        import torch

        B = int(self.members[0]["train_batch_size"])
        draws = [self.buffers[m].sample(B, self.replay_rngs[m]) for m in members]
        batch = {key: torch.from_numpy(np.stack([d[key] for d in draws]))
                 for key in ("obs", "actions", "rewards", "next_obs", "discounts")}
        stack = self.q if len(members) == self.P else self.q.rows(members)
        online = torch.from_numpy(stack.flat).requires_grad_()
        with torch.no_grad():
            next_q = stack.call(torch.from_numpy(np.ascontiguousarray(self.target[members])), stack.acting_buffers(),
                                batch["next_obs"].float())
            best = stack.call(torch.from_numpy(stack.flat), stack.acting_buffers(), batch["next_obs"].float()).argmax(-1)
            double = torch.tensor([bool(self.members[m]["double_q"]) for m in members])[:, None]
            next_value = torch.where(double, next_q.gather(-1, best[..., None])[..., 0], next_q.max(-1).values)
            y = batch["rewards"] + batch["discounts"] * next_value
        q = stack.call(online, stack._buffers, batch["obs"].float()).gather(-1, batch["actions"][..., None])[..., 0]
        losses = torch.nn.functional.smooth_l1_loss(q, y, reduction="none").mean(-1)  # [members]
        losses.sum().backward()
        grad = online.grad.numpy()  # type: ignore[union-attr]
        adam = self.adam if len(members) == self.P else self.adam.rows(members)
        flat = stack.flat
        adam.step(flat, grad, self.hyper("lr")[members], self.hyper("max_grad_norm")[members])
        if len(members) != self.P:
            self.q.put_rows(members, stack)
            self.adam.put_rows(members, adam)
        self.num_updates[members] += 1
        return {"td_loss": losses.detach().numpy(), "q_mean": q.detach().mean(-1).numpy()}

    def _update_targets(self, members: Sequence[int]) -> None:
        for m in members:
            if self.env_steps[m] - self.last_target_update[m] >= int(self.members[m]["target_network_update_freq"]):
                tau = F32(self.members[m]["tau"])
                self.target[m] += tau * (self.q.flat[m] - self.target[m])  # tau = 1: a copy
                self.last_target_update[m] = self.env_steps[m]

    # -- one iteration --------------------------------------------------------------------------------
    def train(self, learning: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """One iteration of every member, or of the members ``learning`` only (the others' envs
        step on, but nothing of it is theirs: their state stays as it was): a result per learning
        member, DQN's keys, in order. A member whose loss or parameters are no longer finite has
        ``"error"`` in its result."""
        chosen = list(range(self.P)) if learning is None else sorted(int(m) for m in learning)
        self.envs.learning = np.zeros(self.P, dtype=bool)
        self.envs.learning[chosen] = True
        c = self.members[0]
        per_round = math.ceil(int(c["train_freq"]) / self.N)
        starts = max(1, int(c["num_steps_sampled_before_learning_starts"]))
        sampled = np.zeros(self.P, dtype=np.int64)
        sums: dict[str, np.ndarray] = {"td_loss": np.zeros(self.P), "q_mean": np.zeros(self.P)}
        updates = np.zeros(self.P, dtype=np.int64)
        with np.errstate(all="ignore"):  # a member that diverges is told below, by name
            while sampled[chosen].min() < int(c["min_sample_timesteps_per_iteration"]):
                sampled += self._sample_round(per_round)
                ready = [m for m in chosen if len(self.buffers[m]) >= starts]
                for _ in range(int(c["gradient_steps"]) if ready else 0):
                    stats = self.update(ready)
                    for key, values in stats.items():
                        sums[key][ready] += values
                    updates[ready] += 1
                self._update_targets(chosen)
        results = []
        for m in chosen:
            means = {key: float(sums[key][m] / updates[m]) if updates[m] else math.nan for key in sums}
            result: dict[str, Any] = {
                **self.envs.episode_stats(m), **means, "cur_lr": float(self.members[m]["lr"]),
                "epsilon": float(self.epsilons()[m]), "num_updates": int(self.num_updates[m]),
                "replay_size": len(self.buffers[m]), "num_sgd_updates": int(updates[m]),
                "members_learning": len(chosen)}
            if m in self.envs.errors:
                result["error"] = f"member {m}'s env raised:\n{self.envs.errors.pop(m)}"
            elif updates[m] and not (math.isfinite(means["td_loss"]) and np.isfinite(self.q.flat[m]).all()):
                result["error"] = (f"member {m}'s loss or parameters are not finite (lr {self.members[m]['lr']!r}): "
                                   f"td_loss {means['td_loss']}")
            results.append(result)
        return results

    # -- one member: joining, its config, its state ---------------------------------------------------
    def join(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` starts anew as a trial of ``config`` (its signature the pack's): a fresh
        network from its seed, its target a copy, an empty buffer, no optimiser state, no env steps."""
        self.members[m] = check_pack([{**config, **{k: self.members[m][k] for k in SIGNATURE}}])[0]
        self.q.take(m, build_q(self.members[m], self.obs_space, self.act_space))
        self.target[m] = self.q.flat[m]
        self.adam.reset(m)
        self.buffers[m] = self._new_buffer()
        self.assemble[m] = NStepTransitions(float(self.members[m]["gamma"]), int(self.members[m]["n_step"]))
        self.replay_rngs[m] = np.random.default_rng([int(self.members[m]["seed"]), 2])
        self.last_target_update[m], self.num_updates[m] = 0, 0
        self.envs.join(m)

    def configure(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` learns on with ``config``'s per-member hyperparameters (its signature the
        pack's); a new gamma starts its n-step windows anew, as the trainer's does."""
        self.members[m] = check_pack([{**{k: v for k, v in config.items() if k in PER_MEMBER},
                                       **{k: self.members[m][k] for k in SIGNATURE}}])[0]
        if self.assemble[m].gamma != float(self.members[m]["gamma"]):
            self.assemble[m] = NStepTransitions(float(self.members[m]["gamma"]), int(self.members[m]["n_step"]))

    def restart_counts(self, m: int, env_steps: int, episodes_total: int, episodes: Sequence[tuple[float, int]]) -> None:
        self.envs.restart_counts(m, env_steps, episodes_total, episodes)

    def stop(self) -> None:
        self.envs.stop()
