"""SAC for a population of members in one process: the learner of packed SAC trials.

P members, each a SAC agent (a tanh-squashed Gaussian actor, twin Q critics, target critics, a
learned temperature; the built-in MLPs or a user's actor module) on a flat Box observation and
bounded Box actions, train at once. Each network kind is a stack of the members' copies
(``algorithms/models/stacked.py``: one ``torch.func.vmap`` pass for all), its parameters one
flat buffer ``[P, D]`` stepped by a population Adam (``algorithms/optim/population_adam.py``);
the target critics are a second buffer of the critics' layout, and the temperatures a ``[P, 1]``
buffer of log alphas. Each member has its own replay buffer of its own transitions (n-step with
its own gamma), its own lr, tau, initial alpha, target entropy and gradient clip.

An iteration is the SAC trainer's (``algorithms/core/off_policy.py``, ``algorithms/sac/trainer.py``)
for every member at once: rounds of ``train_freq`` env steps (uniformly random actions until it
has sampled ``num_steps_sampled_before_learning_starts``), then ``gradient_steps`` updates on its
own minibatches, each the trainer's: the temperature towards the target entropy, the critics
towards the soft Bellman target of the target critics, the actor through the updated critics,
the target critics ``tau`` of the way towards the critics. Members never mix.

    pack = PopulationSAC([{"env": "Pendulum-v1", "lr": lr, "seed": 0} for lr in (1e-4, 3e-4)])
    results = pack.train()          # one result per member, as a SAC trial reports it
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from algorithms.core.packed_member import shape_value
from algorithms.data.replay_buffer import NStepTransitions, ReplayBuffer
from algorithms.models.stacked import StackedModules
from algorithms.optim.population_adam import PopulationAdam
from algorithms.sac.trainer import SAC_DEFAULTS, make_actor, make_module_actor, squashed_sample
from algorithms.sampling.fragment import Fragment
from algorithms.sampling.population_envs import PopulationEnvs

#: Keys every member of a pack shares (they fix the arrays' shapes and the iteration's cadence),
#: with SAC's defaults.
SIGNATURE: dict[str, Any] = {
    "env": None, "env_config": {}, "num_envs_per_worker": 1,
    **{key: SAC_DEFAULTS[key] for key in ("train_batch_size", "train_freq", "gradient_steps",
                                          "min_sample_timesteps_per_iteration", "num_steps_sampled_before_learning_starts",
                                          "replay_buffer_config", "n_step", "hidden_sizes", "activation", "twin_q")},
    "model": None, "model_config": {}}
#: Keys each member has its own value of, with SAC's defaults.
PER_MEMBER: dict[str, Any] = {key: SAC_DEFAULTS[key] for key in ("lr", "gamma", "tau", "initial_alpha",
                                                                  "target_entropy", "max_grad_norm")} | {"seed": 0}
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
            raise ValueError(f"pack_trials: a packed SAC member takes the keys {sorted(allowed)}; got {unknown}")
        member = {**SIGNATURE, **PER_MEMBER, **config}
        if member["max_grad_norm"] is None:  # off
            member["max_grad_norm"] = math.inf
        members.append(member)
    for key in SIGNATURE:
        values = {shape_value(m[key]) for m in members}
        if len(values) > 1:
            raise ValueError(f"pack_trials: members of a pack share {key!r} (it fixes the arrays' shapes); "
                             f"got {sorted(values)}")
    if members[0]["env"] is None:
        raise ValueError("pack_trials: config key 'env' is required")
    return members


def build_networks(member: Mapping[str, Any], obs_space: gym.spaces.Box, act_space: gym.spaces.Box) -> tuple[Any, Any]:
    """Member's actor and critics, drawn from its seed as the SAC trainer draws them (actor
    first; torch's global generator forked)."""
    import torch

    from algorithms.models.q_critics import make_critic

    obs_dim, act_dim = int(np.prod(obs_space.shape)), int(np.prod(act_space.shape))
    sizes = {"hidden_sizes": list(member["hidden_sizes"]), "activation": member["activation"]}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(member["seed"]))
        if member["model"] is not None:
            actor = make_module_actor(member["model"], dict(member["model_config"]), obs_space, act_space)
        else:
            actor = make_actor(obs_dim, act_dim, **sizes)
        critic = make_critic(obs_dim, act_dim, **sizes, twin=bool(member["twin_q"]))
    return actor, critic


class PopulationSAC:
    """SAC trained for every member of a pack at once (see the module docstring)."""

    def __init__(self, configs: Sequence[Mapping[str, Any]]) -> None:
        import torch

        self.members = check_pack(configs)
        first = self.members[0]
        self.P, self.N = len(self.members), int(first["num_envs_per_worker"])
        self.envs = PopulationEnvs(self.members, self.N, "SAC", actions=gym.spaces.Box)
        self.obs_space: gym.spaces.Box = self.envs.observation_space
        self.act_space: gym.spaces.Box = self.envs.action_space  # type: ignore[assignment]  # a Box: PopulationEnvs checked it
        self.act_dim = int(np.prod(self.act_space.shape))
        self.low = self.act_space.low.reshape(-1).astype(F32)
        self.high = self.act_space.high.reshape(-1).astype(F32)
        built = [build_networks(m, self.obs_space, self.act_space) for m in self.members]
        self.actor = StackedModules([actor for actor, _ in built])
        self.critic = StackedModules([critic for _, critic in built])
        self.target = self.critic.flat.copy()
        self.log_alpha = np.array([[math.log(float(m["initial_alpha"]))] for m in self.members], dtype=F32)
        self.adams = {"actor": PopulationAdam(self.P, self.actor.flat.shape[1]),
                      "critic": PopulationAdam(self.P, self.critic.flat.shape[1]), "alpha": PopulationAdam(self.P, 1)}
        self.buffers = [self._new_buffer() for _ in range(self.P)]
        self.assemble = [NStepTransitions(float(m["gamma"]), int(m["n_step"])) for m in self.members]
        self.replay_rngs = [np.random.default_rng([int(m["seed"]), 2]) for m in self.members]
        self.act_rng = np.random.default_rng([int(first["seed"]), self.P, 1])
        self.noise = torch.Generator().manual_seed(int(first["seed"]) * 1_000 + self.P)
        self.num_updates = np.zeros(self.P, dtype=np.int64)

    def _new_buffer(self) -> ReplayBuffer:
        return ReplayBuffer(int(self.members[0]["replay_buffer_config"]["capacity"]), self.obs_space,
                            (self.act_dim,), np.float32)

    @property
    def env_steps(self) -> np.ndarray:
        return self.envs.env_steps

    def hyper(self, key: str) -> np.ndarray:
        """The members' values of a numeric :data:`PER_MEMBER` key, as a ``[P, 1]`` float32 column."""
        return np.array([[float(m[key])] for m in self.members], dtype=F32)

    def target_entropy(self) -> np.ndarray:
        """Each member's target entropy, ``[P, 1]`` ("auto": minus the action dimensions)."""
        return np.array([[-float(self.act_dim) if m["target_entropy"] == "auto" else float(m["target_entropy"])]
                         for m in self.members], dtype=F32)

    # -- sampling -----------------------------------------------------------------------------------
    def _sample_round(self, vector_steps: int) -> np.ndarray:
        """``vector_steps`` steps of every member's envs (uniformly random actions until it may
        learn, else its actor's exploring ones), each member's transitions into its buffer; the
        transitions each member got ``[P]``."""
        import torch

        P, N, T, A = self.P, self.N, vector_steps, self.act_dim
        rows: dict[str, Any] = {"obs": np.empty((T, P, N, self.envs.obs_dim), dtype=F32),
                                "actions": np.empty((T, P, N, A), dtype=F32), "rewards": np.empty((T, P, N), dtype=F32),
                                **{k: np.empty((T, P, N), dtype=bool) for k in ("terminated", "truncated", "valid")}}
        uniform = self.env_steps < int(self.members[0]["num_steps_sampled_before_learning_starts"])
        for t in range(T):
            rows["obs"][t] = self.envs.obs
            with torch.no_grad():
                mean, log_std = self.actor.call(torch.from_numpy(self.actor.flat), self.actor.acting_buffers(),
                                                torch.from_numpy(self.envs.obs))
                noise = torch.randn(mean.shape, generator=self.noise)
                squashed = squashed_sample(mean, log_std, noise)[0].numpy()
            squashed = np.where(uniform[:, None, None], self.act_rng.uniform(-1.0, 1.0, (P, N, A)), squashed).astype(F32)
            rows["actions"][t] = squashed
            env_actions = self.low + (squashed + 1) * 0.5 * (self.high - self.low)
            step = self.envs.step(env_actions.reshape(P, N, *self.act_space.shape))
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
        """One SAC update of each of ``members`` on its own minibatch from its own buffer (the
        trainer's ``update``, member by member in one pass); per member its losses, alpha, Q mean
        and entropy."""
        import torch

        whole = len(members) == self.P
        actor = self.actor if whole else self.actor.rows(members)
        critic = self.critic if whole else self.critic.rows(members)
        adams = self.adams if whole else {name: adam.rows(members) for name, adam in self.adams.items()}
        log_alpha_rows = self.log_alpha if whole else self.log_alpha[members]
        B = int(self.members[0]["train_batch_size"])
        draws = [self.buffers[m].sample(B, self.replay_rngs[m]) for m in members]
        batch = {key: torch.from_numpy(np.stack([d[key] for d in draws]))
                 for key in ("obs", "actions", "rewards", "next_obs", "discounts")}
        obs, next_obs = batch["obs"].float(), batch["next_obs"].float()

        def sample(theta: torch.Tensor, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            mean, log_std = actor.call(theta, actor._buffers, observations)
            return squashed_sample(mean, log_std, torch.randn(mean.shape, generator=self.noise))

        def step(name: str, flat: np.ndarray, theta: torch.Tensor) -> None:
            assert theta.grad is not None
            adams[name].step(flat, theta.grad.numpy(), self.hyper("lr")[members], self.hyper("max_grad_norm")[members])

        # temperature: towards the target entropy (this update's losses use it as it was before)
        actor_theta = torch.from_numpy(actor.flat).requires_grad_()
        pi_actions, logp = sample(actor_theta, obs)
        log_alpha = torch.from_numpy(log_alpha_rows).requires_grad_()
        alpha = log_alpha.detach().exp()  # [P', 1]
        target_entropy = torch.from_numpy(self.target_entropy()[members])
        alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean(-1)
        alpha_loss.sum().backward()
        adams["alpha"].step(log_alpha_rows, log_alpha.grad.numpy(), self.hyper("lr")[members],  # type: ignore[union-attr]
                            np.full((len(members), 1), math.inf, dtype=F32))
        # critics: towards the soft Bellman target of the target critics
        with torch.no_grad():
            next_actions, next_logp = sample(torch.from_numpy(actor.flat), next_obs)
            target_rows = torch.from_numpy(np.ascontiguousarray(self.target[members]))
            next_q = torch.stack(list(critic.call(target_rows, critic.acting_buffers(), next_obs, next_actions))).min(0).values
            y = batch["rewards"] + batch["discounts"] * (next_q - alpha * next_logp)
        critic_theta = torch.from_numpy(critic.flat).requires_grad_()
        qs = list(critic.call(critic_theta, critic._buffers, obs, batch["actions"]))
        q_losses = [((q - y) ** 2).mean(-1) for q in qs]
        critic_loss = 0.5 * sum(q_losses[1:], q_losses[0])
        critic_loss.sum().backward()
        step("critic", critic.flat, critic_theta)
        # actor: through the updated critics, held fixed
        q_pi = torch.stack(list(critic.call(torch.from_numpy(critic.flat), critic.acting_buffers(), obs,
                                            pi_actions))).min(0).values
        actor_loss = (alpha * logp - q_pi).mean(-1)
        actor_loss.sum().backward()
        step("actor", actor.flat, actor_theta)
        tau = self.hyper("tau")[members]
        self.target[members] += tau * (critic.flat - self.target[members])
        if not whole:
            self.actor.put_rows(members, actor)
            self.critic.put_rows(members, critic)
            self.log_alpha[members] = log_alpha_rows
            for name, adam in adams.items():
                self.adams[name].put_rows(members, adam)
        self.num_updates[members] += 1
        return {"actor_loss": actor_loss.detach().numpy(), "critic_loss": critic_loss.detach().numpy(),
                "alpha_loss": alpha_loss.detach().numpy(), "alpha": alpha[:, 0].numpy(),
                "q_mean": qs[0].detach().mean(-1).numpy(), "entropy": -logp.detach().mean(-1).numpy()}

    # -- one iteration --------------------------------------------------------------------------------
    def train(self, learning: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """One iteration of every member, or of the members ``learning`` only (the others' envs
        step on, but nothing of it is theirs): a result per learning member, SAC's keys, in order.
        A member whose losses or parameters are no longer finite has ``"error"`` in its result."""
        chosen = list(range(self.P)) if learning is None else sorted(int(m) for m in learning)
        self.envs.learning = np.zeros(self.P, dtype=bool)
        self.envs.learning[chosen] = True
        c = self.members[0]
        per_round = math.ceil(int(c["train_freq"]) / self.N)
        starts = max(1, int(c["num_steps_sampled_before_learning_starts"]))
        sampled = np.zeros(self.P, dtype=np.int64)
        keys = ("actor_loss", "critic_loss", "alpha_loss", "alpha", "q_mean", "entropy")
        sums = {key: np.zeros(self.P) for key in keys}
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
        results = []
        for m in chosen:
            means = {key: float(sums[key][m] / updates[m]) if updates[m] else math.nan for key in keys}
            result: dict[str, Any] = {
                **self.envs.episode_stats(m), **means, "cur_lr": float(self.members[m]["lr"]),
                "num_updates": int(self.num_updates[m]), "replay_size": len(self.buffers[m]),
                "num_sgd_updates": int(updates[m]), "members_learning": len(chosen)}
            finite = all(math.isfinite(means[k]) for k in keys) and all(
                np.isfinite(flat[m]).all() for flat in (self.actor.flat, self.critic.flat, self.log_alpha))
            if m in self.envs.errors:
                result["error"] = f"member {m}'s env raised:\n{self.envs.errors.pop(m)}"
            elif updates[m] and not finite:
                result["error"] = (f"member {m}'s losses or parameters are not finite (lr {self.members[m]['lr']!r}): "
                                   f"{ {k: means[k] for k in keys} }")
            results.append(result)
        return results

    # -- one member: joining, its config --------------------------------------------------------------
    def join(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` starts anew as a trial of ``config`` (its signature the pack's): fresh
        networks from its seed, its target critics a copy, its initial alpha, an empty buffer, no
        optimiser state, no env steps."""
        self.members[m] = check_pack([{**config, **{k: self.members[m][k] for k in SIGNATURE}}])[0]
        actor, critic = build_networks(self.members[m], self.obs_space, self.act_space)
        self.actor.take(m, actor)
        self.critic.take(m, critic)
        self.target[m] = self.critic.flat[m]
        self.log_alpha[m] = math.log(float(self.members[m]["initial_alpha"]))
        for adam in self.adams.values():
            adam.reset(m)
        self.buffers[m] = self._new_buffer()
        self.assemble[m] = NStepTransitions(float(self.members[m]["gamma"]), int(self.members[m]["n_step"]))
        self.replay_rngs[m] = np.random.default_rng([int(self.members[m]["seed"]), 2])
        self.num_updates[m] = 0
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
