"""SAC: config errors, the squashed Gaussian's log-density, the update's targets by hand, bounds,
checkpoints with and without the replay buffer, a killed rollout actor (ASHA and PBT sweeps:
tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from algorithms import SAC
from algorithms.sac.trainer import squashed_sample

SMALL = {"env": "Pendulum-v1", "hidden_sizes": [32], "min_sample_timesteps_per_iteration": 64, "train_freq": 16,
         "gradient_steps": 4, "learning_starts": 32, "train_batch_size": 32, "replay_buffer_config": {"capacity": 1000},
         "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5}


def test_unknown_key_names_itself_and_lists_allowed_keys():
    with pytest.raises(ValueError, match=r"SAC config: unknown key 'epsilon'; allowed keys: \[.*'initial_alpha'"):
        SAC(config={"env": "Pendulum-v1", "epsilon": 0.1})


@pytest.mark.parametrize("key, value, match", [
    ("tau", 1.5, r"must be in \(0, 1\]"),
    ("initial_alpha", 0, "must be a number > 0"),
    ("target_entropy", "high", "must be 'auto'"),
    ("twin_q", 2, "must be True or False"),
    ("gradient_steps", 0, "must be an int >= 1"),
    ("num_steps_sampled_before_learning_starts", -1, "must be an int >= 0"),
])
def test_bad_values_name_their_key(key, value, match):
    with pytest.raises(ValueError, match=rf"config key '{key}': {match}"):
        SAC(config={"env": "Pendulum-v1", key: value})


def test_a_discrete_action_space_is_one_error_naming_env():
    with pytest.raises(ValueError, match=r"config key 'env': SAC needs a bounded Box action space"):
        SAC(config={**SMALL, "env": "CartPole-v1"})


def test_the_squashed_gaussian_log_density_is_the_textbook_one():
    # log pi(tanh u) = log N(u; mean, std) - sum log(1 - tanh(u)^2), where 1 - tanh(u)^2 = 1 / cosh(u)^2,
    # in float64 for reference (1 - tanh(u)^2 itself rounds to 0 for |u| > 19)
    from torch.distributions import Normal

    g = torch.Generator().manual_seed(0)
    mean, log_std, noise = (torch.randn(64, 3, generator=g) for _ in range(3))
    actions, logp = squashed_sample(mean, log_std, noise)
    u = (mean + log_std.exp() * noise).double()
    reference = Normal(mean.double(), log_std.exp().double()).log_prob(u).sum(-1) + 2 * torch.log(torch.cosh(u)).sum(-1)
    torch.testing.assert_close(actions, torch.tanh(mean + log_std.exp() * noise))
    torch.testing.assert_close(logp.double(), reference, rtol=1e-4, atol=1e-3)


def test_the_critics_descend_to_the_soft_bellman_target_computed_by_hand():
    trainer = SAC(config={**SMALL, "seed": 0, "initial_alpha": 0.5})
    try:
        rng = np.random.default_rng(0)
        batch = {"obs": rng.normal(size=(8, 3)).astype(np.float32),
                 "actions": rng.uniform(-1, 1, size=(8, 1)).astype(np.float32),
                 "rewards": rng.normal(size=8).astype(np.float32),
                 "next_obs": rng.normal(size=(8, 3)).astype(np.float32),
                 "discounts": np.where(rng.random(8) < 0.3, 0.0, 0.99).astype(np.float32)}
        tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
        policy = trainer.policy
        state = trainer.torch_rng.get_state()
        with torch.no_grad():
            torch.randn((8, 1), generator=trainer.torch_rng)  # the update's first draw: the actions for the actor
            # the temperature steps first (Adam's first step moves log alpha by -lr * sign(grad)); the
            # losses use its value from before that step, as SB3's
            mean, log_std = policy.actor(tensors["obs"])
            _, logp = squashed_sample(mean, log_std, torch.randn((8, 1), generator=torch.Generator().set_state(state)))
            grad = -(logp + trainer.target_entropy).mean()
            log_alpha_after = math.log(0.5) - trainer.cfg["lr"] * float(torch.sign(grad))
            alpha = 0.5
            next_mean, next_log_std = policy.actor(tensors["next_obs"])
            next_actions, next_logp = squashed_sample(next_mean, next_log_std, torch.randn((8, 1), generator=trainer.torch_rng))
            next_q = torch.minimum(*policy.target(tensors["next_obs"], next_actions))
            y = tensors["rewards"] + tensors["discounts"] * (next_q - alpha * next_logp)
            q1, q2 = policy.critic(tensors["obs"], tensors["actions"])
            expected = 0.5 * (((q1 - y) ** 2).mean() + ((q2 - y) ** 2).mean())
        trainer.torch_rng.set_state(state)
        target_before = [p.clone() for p in policy.target.parameters()]
        stats = trainer.update(tensors)
        assert float(stats["alpha"]) == pytest.approx(alpha, rel=1e-5)
        assert float(policy.log_alpha) == pytest.approx(log_alpha_after, rel=1e-5)
        assert float(stats["critic_loss"]) == pytest.approx(float(expected), rel=1e-4)
        tau = trainer.cfg["tau"]
        for before, t, p in zip(target_before, policy.target.parameters(), policy.critic.parameters()):
            torch.testing.assert_close(t, before + tau * (p - before))  # Polyak after the update
    finally:
        trainer.stop()


@pytest.mark.usefixtures("ray_session")
def test_rollout_actors_act_within_bounds_and_a_killed_one_is_replaced():
    import ray

    trainer = SAC(config={**SMALL, "seed": 0, "num_workers": 2})
    try:
        first = trainer.train()
        actions = trainer.buffer.state()["actions"]
        assert first["replay_size"] == len(actions) > 0
        assert np.all(np.abs(actions) <= 1.0)  # squashed actions in the buffer; the env got them scaled
        victim = trainer.workers.actors[1]
        ray.kill(victim)
        result = trainer.train()
        assert result["num_worker_restarts"] == 1 and trainer.workers.actors[1] is not victim
        assert result["num_updates"] > first["num_updates"]
    finally:
        trainer.stop()
    env_actions = trainer.compute_actions(np.zeros((5, 3), np.float32), explore=True, seed=0)
    assert env_actions.shape == (5, 1) and np.all(np.abs(env_actions) <= 2.0)  # Pendulum's torque bounds


@pytest.mark.parametrize("store_buffer", [True, False], ids=["with-buffer", "without-buffer"])
def test_checkpoint_round_trip(tmp_path, store_buffer):
    config = {**SMALL, "seed": 0, "store_buffer_in_checkpoints": store_buffer, "learning_starts": 100}
    trainer = SAC(config=config)
    try:
        for _ in range(3):
            trainer.train()
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(16, 3)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        alpha, updates = float(trainer.policy.log_alpha.detach().exp()), trainer.num_updates
    finally:
        trainer.stop()
    restored = SAC(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_allclose(restored.compute_actions(obs, explore=False), actions)
        assert float(restored.policy.log_alpha.detach().exp()) == pytest.approx(alpha) and restored.num_updates == updates
        result = restored.train()
        if store_buffer:
            assert result["num_updates"] > updates
        else:  # it refills before learning: 64 new steps are fewer than learning_starts
            assert result["replay_size"] == result["env_steps_this_iter"] and result["num_updates"] == updates
    finally:
        restored.stop()


def make_actor_module(observation_space, action_space, model_config):
    """A user's actor under PPO's Box contract: (dist_inputs = means then log stds, value)."""
    act_dim = action_space.shape[0]

    class Actor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = torch.nn.Sequential(torch.nn.Linear(observation_space.shape[0], 32), torch.nn.LayerNorm(32),
                                             torch.nn.ReLU())
            self.pi = torch.nn.Linear(32, 2 * act_dim)
            self.vf = torch.nn.Linear(32, 1)

        def forward(self, obs):
            h = self.trunk(obs)
            return self.pi(h), self.vf(h)[:, 0]

    return Actor()


def make_wrong_actor(observation_space, action_space, model_config):
    return torch.nn.Linear(observation_space.shape[0], 1)  # means only, no log stds


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("num_workers", [0, 2], ids=["in-process", "rollout-actors"])
def test_an_actor_of_ones_own_learns_acts_within_bounds_and_round_trips(tmp_path, num_workers):
    config = {**{k: v for k, v in SMALL.items() if k != "hidden_sizes"}, "seed": 0, "model": make_actor_module,
              "num_workers": num_workers}
    trainer = SAC(config=config)
    try:
        first = trainer.train()
        result = trainer.train()
        assert result["num_updates"] > first["num_updates"] > 0
        assert isinstance(trainer.policy.actor.module.trunk[1], torch.nn.LayerNorm)
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        assert np.all(np.abs(trainer.compute_actions(obs, explore=True, seed=0)) <= 2.0)
    finally:
        trainer.stop()
    restored = SAC(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_allclose(restored.compute_actions(obs, explore=False), actions, rtol=1e-6)
    finally:
        restored.stop()


def test_an_actor_with_the_wrong_output_shape_is_one_error_naming_model_before_sampling():
    with pytest.raises(ValueError, match=r"config key 'model' \(make_wrong_actor\): SAC's forward\(obs\) must return "
                                         r"dist_inputs of shape \(batch, 2\).*got a tensor of shape \(2, 1\)"):
        SAC(config={"env": "Pendulum-v1", "model": make_wrong_actor})


def test_n_step_targets_with_one_step_rounds():
    """train_freq=1 samples one step per round: the 3-step windows still span three steps (they
    continue across rounds), so the buffer's discounts are gamma ** 3 (Pendulum never terminates;
    only windows cut by its 200-step truncation are shorter)."""
    trainer = SAC(config={**SMALL, "seed": 0, "train_freq": 1, "gradient_steps": 1, "n_step": 3, "gamma": 0.9,
                          "min_sample_timesteps_per_iteration": 100})
    try:
        trainer.train()
        discounts = trainer.buffer.data["discounts"][: len(trainer.buffer)]
        assert len(discounts) >= 95
        assert np.allclose(discounts, 0.9 ** 3)
    finally:
        trainer.stop()
