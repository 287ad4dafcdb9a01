"""SAC for a population of members in one process: the learner of packed SAC trials.

P members, each a SAC agent (a tanh-squashed Gaussian actor, twin Q critics, target critics, a
learned temperature; the built-in MLPs or a user's actor module) on a flat Box observation and
bounded Box actions, train at once. Each network kind is a stack of the members' copies
(``algorithms/models/stacked.py``: one ``torch.func.vmap`` pass for all), its parameters one
flat buffer ``[P, D]`` stepped by a population Adam (``algorithms/optim/population_adam.py``);
the target critics are a second buffer of the critics' layout, and the temperatures a ``[P, 1]``
buffer of log alphas. Each member has its own replay buffer of its own transitions (n-step with
its own gamma), its own lr, tau, initial alpha, target entropy and gradient clip.

An iteration is the SAC trainer's for every member at once (``algorithms/core/off_policy_population.py``):
rounds of env steps (uniformly random actions until a member has sampled
``num_steps_sampled_before_learning_starts``) into each member's buffer, and updates on its own
minibatches, each the trainer's (``algorithms/sac/trainer.py``): the temperature towards the target
entropy, the critics towards the soft Bellman target of the target critics, the actor through the
updated critics, the target critics ``tau`` of the way towards the critics. Members never mix.

    pack = PopulationSAC([{"env": "Pendulum-v1", "lr": lr, "seed": 0} for lr in (1e-4, 3e-4)])
    results = pack.train()          # one result per member, as a SAC trial reports it
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from algorithms.core.off_policy_population import OffPolicyPopulation
from algorithms.models.stacked import StackedModules
from algorithms.optim.population_adam import PopulationAdam
from algorithms.sac.model import make_actor, make_module_actor, squashed_sample

#: Keys every member of a pack shares (they fix the arrays' shapes and the iteration's cadence),
#: with SAC's defaults (``SAC_DEFAULTS``: tests/algorithms/sac/test_population.py checks they agree;
#: this module does not import the trainer, which imports it for its packs).
SIGNATURE: dict[str, Any] = {
    "env": None, "env_config": {}, "num_envs_per_worker": 1, "train_batch_size": 256, "train_freq": 1,
    "gradient_steps": 1, "min_sample_timesteps_per_iteration": 1000, "num_steps_sampled_before_learning_starts": 100,
    "replay_buffer_config": {"capacity": 1_000_000}, "n_step": 1, "hidden_sizes": [256, 256], "activation": "relu",
    "twin_q": True, "model": None, "model_config": {}, "num_gpus_for_learner": 0}
#: Keys each member has its own value of, with SAC's defaults.
PER_MEMBER: dict[str, Any] = {"lr": 3e-4, "gamma": 0.99, "tau": 0.005, "initial_alpha": 1.0, "target_entropy": "auto",
                              "max_grad_norm": None, "seed": 0}
F32 = np.float32


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


class PopulationSAC(OffPolicyPopulation):
    """SAC trained for every member of a pack at once (see the module docstring)."""

    what, signature, per_member, actions = "SAC", SIGNATURE, PER_MEMBER, gym.spaces.Box
    stat_keys = ("actor_loss", "critic_loss", "alpha_loss", "alpha", "q_mean", "entropy")

    def build_networks(self) -> None:
        import torch

        box: gym.spaces.Box = self.act_space  # type: ignore[assignment]  # a Box: PopulationEnvs checked it
        self.act_dim = int(np.prod(box.shape))
        self.low, self.high = box.low.reshape(-1).astype(F32), box.high.reshape(-1).astype(F32)
        built = [build_networks(m, self.obs_space, box) for m in self.members]
        self.actor = StackedModules([actor for actor, _ in built], self.device)
        self.critic = StackedModules([critic for _, critic in built], self.device)
        self.target = self.critic.theta.clone()
        self.log_alpha = torch.tensor([[math.log(float(m["initial_alpha"]))] for m in self.members], device=self.device)
        self.adams = {"actor": PopulationAdam(self.P, self.actor.theta.shape[1], self.device),
                      "critic": PopulationAdam(self.P, self.critic.theta.shape[1], self.device),
                      "alpha": PopulationAdam(self.P, 1, self.device)}
        self.noise = torch.Generator(self.device).manual_seed(int(self.members[0]["seed"]) * 1_000 + self.P)
        self._uniform = np.ones(self.P, dtype=bool)

    def reset_networks(self, m: int) -> None:
        actor, critic = build_networks(self.members[m], self.obs_space, self.act_space)  # type: ignore[arg-type]
        self.actor.take(m, actor)
        self.critic.take(m, critic)
        self.target[m] = self.critic.theta[m]
        self.log_alpha[m] = math.log(float(self.members[m]["initial_alpha"]))
        for adam in self.adams.values():
            adam.reset(m)

    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        return (self.act_dim,), np.float32

    def target_entropy(self) -> np.ndarray:
        """Each member's target entropy, ``[P, 1]`` ("auto": minus the action dimensions)."""
        return np.array([[-float(self.act_dim) if m["target_entropy"] == "auto" else float(m["target_entropy"])]
                         for m in self.members], dtype=F32)

    def begin_round(self) -> None:
        # uniformly random actions until learning starts (SB3's learning_starts), as the trainer's
        self._uniform = self.env_steps < int(self.members[0]["num_steps_sampled_before_learning_starts"])

    def act(self, obs: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each member's squashed Gaussian sample (uniform in [-1, 1] until it may learn), and the
        same scaled to the action bounds (the others': the middle of the bounds)."""
        import torch

        with torch.no_grad():
            mean, log_std = self.actor.call(*self.acting(self.actor, members), self.on_device(obs))
            squashed = squashed_sample(mean, log_std, self.gaussian(mean.shape))[0].cpu().numpy()
        uniform = self.act_rng.uniform(-1.0, 1.0, squashed.shape)
        squashed = self.spread(np.where(self._uniform[members, None, None], uniform, squashed).astype(F32), members)
        env_actions = self.low + (squashed + 1) * 0.5 * (self.high - self.low)
        return squashed, env_actions.reshape(*squashed.shape[:2], *self.act_space.shape)  # type: ignore[misc]

    def gaussian(self, shape: Any) -> Any:
        """Standard normal noise of ``shape`` on the device, from the population's generator."""
        import torch

        return torch.randn(shape, generator=self.noise, device=self.device)

    # -- learning -----------------------------------------------------------------------------------
    def update(self, members: list[int]) -> dict[str, np.ndarray]:
        """One SAC update of each of ``members`` on its own minibatch from its own buffer (the
        trainer's ``update``, member by member in one pass); per member its losses, alpha, Q mean
        and entropy."""
        import torch

        whole = len(members) == self.P
        actor, critic, adams, log_alpha_rows = self._rows(members)
        batch = self.replayed(members)
        obs, next_obs = batch["obs"].float(), batch["next_obs"].float()

        def sample(theta: torch.Tensor, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            mean, log_std = actor.call(theta, actor._buffers, observations)
            return squashed_sample(mean, log_std, self.gaussian(mean.shape))

        lr, clip = self.column("lr", members), self.column("max_grad_norm", members)

        def step(name: str, stack: StackedModules, theta: torch.Tensor) -> None:
            assert theta.grad is not None
            adams[name].step(stack.theta, theta.grad, lr, clip)

        # temperature: towards the target entropy (this update's losses use it as it was before)
        actor_theta = actor.theta.detach().requires_grad_()
        pi_actions, logp = sample(actor_theta, obs)
        log_alpha = log_alpha_rows.detach().requires_grad_()
        alpha = log_alpha.detach().exp()  # [P', 1]
        target_entropy = self.on_device(self.target_entropy()[members])
        alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean(-1)
        alpha_loss.sum().backward()
        adams["alpha"].step(log_alpha_rows, log_alpha.grad, lr, torch.full_like(lr, math.inf))
        # critics: towards the soft Bellman target of the target critics
        with torch.no_grad():
            next_actions, next_logp = sample(actor.theta, next_obs)
            next_q = torch.stack(list(critic.call(self.target[members], critic.acting_buffers(), next_obs,
                                                  next_actions))).min(0).values
            y = batch["rewards"] + batch["discounts"] * (next_q - alpha * next_logp)
        critic_theta = critic.theta.detach().requires_grad_()
        qs = list(critic.call(critic_theta, critic._buffers, obs, batch["actions"]))
        q_losses = [((q - y) ** 2).mean(-1) for q in qs]
        critic_loss = 0.5 * sum(q_losses[1:], q_losses[0])
        critic_loss.sum().backward()
        step("critic", critic, critic_theta)
        # actor: through the updated critics, held fixed
        q_pi = torch.stack(list(critic.call(critic.theta, critic.acting_buffers(), obs, pi_actions))).min(0).values
        actor_loss = (alpha * logp - q_pi).mean(-1)
        actor_loss.sum().backward()
        step("actor", actor, actor_theta)
        self.target[members] += self.column("tau", members) * (critic.theta - self.target[members])
        if not whole:  # the subset's copies back in place
            self.actor.put_rows(members, actor)
            self.critic.put_rows(members, critic)
            self.log_alpha[members] = log_alpha_rows
            for name, adam in adams.items():
                self.adams[name].put_rows(members, adam)
        stats = {"actor_loss": actor_loss, "critic_loss": critic_loss, "alpha_loss": alpha_loss, "alpha": alpha[:, 0],
                 "q_mean": qs[0].mean(-1), "entropy": -logp.mean(-1)}
        return {key: value.detach().cpu().numpy() for key, value in stats.items()}

    def _rows(self, members: list[int]) -> tuple[StackedModules, StackedModules, dict[str, PopulationAdam], Any]:
        """The actors, critics, optimisers and log alphas of ``members``: this population's own for
        all of them, else copies of their rows."""
        if len(members) == self.P:
            return self.actor, self.critic, self.adams, self.log_alpha
        return (self.actor.rows(members), self.critic.rows(members),
                {name: adam.rows(members) for name, adam in self.adams.items()}, self.log_alpha[members])

    def finite(self, m: int) -> bool:
        return self.actor.finite(m) and self.critic.finite(m) and bool(self.log_alpha[m].isfinite().all())
