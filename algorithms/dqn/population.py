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

An iteration is the DQN trainer's for every member at once (``algorithms/core/off_policy_population.py``):
rounds of env steps into each member's buffer and updates on its own minibatches, then its target
update when due and the epsilon of its env steps. Members never mix: a member's loss reads its
own rows only, so each learns as it would alone.

    pack = PopulationDQN([{"env": "CartPole-v1", "lr": lr, "seed": 0} for lr in (1e-4, 5e-4)])
    results = pack.train()          # one result per member, as a DQN trial reports it
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from algorithms.core.off_policy import schedule_points
from algorithms.core.off_policy_population import OffPolicyPopulation
from algorithms.dqn.model import build_q_module, make_q_network
from algorithms.models.stacked import StackedModules
from algorithms.optim.population_adam import PopulationAdam

#: Keys every member of a pack shares (they fix the arrays' shapes and the iteration's cadence),
#: with DQN's defaults (``DQN_DEFAULTS``: tests/algorithms/dqn/test_population.py checks they agree;
#: this module does not import the trainer, which imports it for its packs).
SIGNATURE: dict[str, Any] = {
    "env": None, "env_config": {}, "num_envs_per_worker": 1, "train_batch_size": 128, "train_freq": 4,
    "gradient_steps": 1, "min_sample_timesteps_per_iteration": 1000, "num_steps_sampled_before_learning_starts": 1000,
    "replay_buffer_config": {"capacity": 50_000}, "n_step": 3, "hidden_sizes": [256, 256], "activation": "relu",
    "dueling": True, "model": None, "model_config": {}, "num_gpus_for_learner": 0}
#: Keys each member has its own value of, with DQN's defaults.
PER_MEMBER: dict[str, Any] = {"lr": 5e-4, "gamma": 0.99, "epsilon": [[0, 1.0], [10_000, 0.05]],
                              "target_network_update_freq": 500, "tau": 1.0, "double_q": True, "max_grad_norm": 40.0,
                              "seed": 0}


def build_q(member: Mapping[str, Any], obs_space: Any, act_space: Any) -> Any:
    """Member's Q network, drawn from its seed as the DQN trainer draws it (torch's global
    generator forked)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(member["seed"]))
        if member["model"] is not None:
            return build_q_module(member["model"], dict(member["model_config"]), obs_space, act_space)
        return make_q_network(int(np.prod(obs_space.shape)), int(act_space.n), list(member["hidden_sizes"]),
                              member["activation"], bool(member["dueling"]))


class PopulationDQN(OffPolicyPopulation):
    """DQN trained for every member of a pack at once (see the module docstring)."""

    what, signature, per_member = "DQN", SIGNATURE, PER_MEMBER
    stat_keys = ("td_loss", "q_mean")

    @classmethod
    def check_member(cls, member: Mapping[str, Any]) -> None:
        schedule_points(member["epsilon"], "epsilon")

    def build_networks(self) -> None:
        self.q = StackedModules([build_q(m, self.obs_space, self.act_space) for m in self.members], self.device)
        self.target = self.q.theta.clone()
        self.adam = PopulationAdam(self.P, self.q.theta.shape[1], self.device)
        self.last_target_update = np.zeros(self.P, dtype=np.int64)
        self._epsilon = self.epsilons()

    def reset_networks(self, m: int) -> None:
        self.q.take(m, build_q(self.members[m], self.obs_space, self.act_space))
        self.target[m] = self.q.theta[m]
        self.adam.reset(m)
        self.last_target_update[m] = 0

    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        return (), np.int64

    def epsilons(self) -> np.ndarray:
        """Each member's epsilon at its env steps, ``[P]``."""
        out = np.empty(self.P)
        for m, member in enumerate(self.members):
            steps, values = schedule_points(member["epsilon"], "epsilon")
            out[m] = np.interp(self.env_steps[m], steps, values)
        return out

    def begin_round(self) -> None:
        self._epsilon = self.epsilons()

    def act(self, obs: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy on each member's Q-values, with its epsilon."""
        import torch

        with torch.no_grad():
            actions = self.q.call(*self.acting(self.q, members), self.on_device(obs)).argmax(-1).cpu().numpy()
        explore = self.act_rng.random(actions.shape) < self._epsilon[members, None]
        actions = self.spread(np.where(explore, self.act_rng.integers(0, self.envs.num_actions, actions.shape), actions),
                              members)
        return actions, actions

    def update(self, members: list[int]) -> dict[str, np.ndarray]:
        """One gradient step of each of ``members`` on its own minibatch: the Huber loss of Q(s, a)
        to its (double) Q-learning target (the trainer's). Per member: td_loss, q_mean."""
        import torch

        batch = self.replayed(members)
        whole = len(members) == self.P
        stack = self.q if whole else self.q.rows(members)
        adam = self.adam if whole else self.adam.rows(members)
        online = stack.theta.detach().requires_grad_()
        next_obs = batch["next_obs"].float()
        with torch.no_grad():
            next_q = stack.call(self.target[members], stack.acting_buffers(), next_obs)
            best = stack.call(stack.theta, stack.acting_buffers(), next_obs).argmax(-1)
            double = torch.tensor([bool(self.members[m]["double_q"]) for m in members], device=self.device)[:, None]
            next_value = torch.where(double, next_q.gather(-1, best[..., None])[..., 0], next_q.max(-1).values)
            y = batch["rewards"] + batch["discounts"] * next_value
        q = stack.call(online, stack._buffers, batch["obs"].float()).gather(-1, batch["actions"][..., None])[..., 0]
        losses = torch.nn.functional.smooth_l1_loss(q, y, reduction="none").mean(-1)  # [members]
        losses.sum().backward()
        assert online.grad is not None
        adam.step(stack.theta, online.grad, self.column("lr", members), self.column("max_grad_norm", members))
        if not whole:  # the subset's copies back in place
            self.q.put_rows(members, stack)
            self.adam.put_rows(members, adam)
        return {"td_loss": losses.detach().cpu().numpy(), "q_mean": q.detach().mean(-1).cpu().numpy()}

    def after_round(self, members: list[int]) -> None:
        """Each member's target network, when its cadence says (tau of the way; 1: a copy)."""
        for m in members:
            if self.env_steps[m] - self.last_target_update[m] >= int(self.members[m]["target_network_update_freq"]):
                self.target[m] += float(self.members[m]["tau"]) * (self.q.theta[m] - self.target[m])
                self.last_target_update[m] = self.env_steps[m]

    def result_extras(self, m: int) -> dict[str, Any]:
        return {"epsilon": float(self.epsilons()[m])}

    def finite(self, m: int) -> bool:
        return self.q.finite(m)
