"""TD3 and DDPG: config errors, DDPG's settings, the update's targets and its delays by hand,
bounds and exploration noise, checkpoints, a user's actor, learning Pendulum with rollout actors
(ASHA and PBT sweeps: tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch

from algorithms import DDPG, TD3

SMALL = {"env": "Pendulum-v1", "hidden_sizes": [32], "min_sample_timesteps_per_iteration": 64, "train_freq": 16,
         "gradient_steps": 4, "learning_starts": 32, "train_batch_size": 32, "replay_buffer_config": {"capacity": 1000},
         "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5}


def test_unknown_key_names_itself_and_lists_allowed_keys():
    with pytest.raises(ValueError, match=r"TD3 config: unknown key 'initial_alpha'; allowed keys: \[.*'policy_delay'"):
        TD3(config={"env": "Pendulum-v1", "initial_alpha": 0.1})


@pytest.mark.parametrize("key, value, named, match", [
    ("tau", 0, "tau", r"must be in \(0, 1\]"),
    ("policy_delay", 0, "policy_delay", "must be an int >= 1"),
    ("twin_q", "yes", "twin_q", "must be True or False"),
    ("smooth_target_policy", 1, "smooth_target_policy", "must be True or False"),
    ("target_noise", -0.1, "target_noise", "must be a number >= 0"),
    ("target_noise_clip", "wide", "target_noise_clip", "must be a number >= 0"),
    ("exploration_config", {"stddev": 0.1, "scale": 2}, "exploration_config",
     "must be a dict with the keys 'type' and 'stddev'"),
    ("exploration_config", {"type": "OrnsteinUhlenbeckNoise"}, "exploration_config.type",
     r"must be one of \['GaussianNoise'\]"),
    ("exploration_config", {"stddev": -1}, "exploration_config.stddev", "must be a number >= 0"),
])
def test_bad_values_name_their_key(key, value, named, match):
    with pytest.raises(ValueError, match=rf"config key '{re.escape(named)}': {match}"):
        TD3(config={"env": "Pendulum-v1", key: value})


def test_a_discrete_action_space_is_one_error_naming_env():
    for cls in (TD3, DDPG):
        with pytest.raises(ValueError, match=rf"config key 'env': {cls.__name__} needs a bounded Box action space"):
            cls(config={**SMALL, "env": "CartPole-v1"})


def test_ddpg_is_td3_without_its_three_changes_and_each_can_be_turned_back_on():
    ddpg = DDPG(config=SMALL)
    try:
        assert (ddpg.cfg["twin_q"], ddpg.cfg["policy_delay"], ddpg.cfg["smooth_target_policy"]) == (False, 1, False)
        assert len(ddpg.policy.critic.qs) == 1
    finally:
        ddpg.stop()
    twin = DDPG(config={**SMALL, "twin_q": True})
    try:
        assert len(twin.policy.critic.qs) == 2
    finally:
        twin.stop()


def _batch(n: int = 8) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(n, 3)).astype(np.float32),
             "actions": rng.uniform(-1, 1, size=(n, 1)).astype(np.float32),
             "rewards": rng.normal(size=n).astype(np.float32),
             "next_obs": rng.normal(size=(n, 3)).astype(np.float32),
             "discounts": np.where(rng.random(n) < 0.3, 0.0, 0.99).astype(np.float32)}
    return {k: torch.from_numpy(v) for k, v in batch.items()}


def test_the_critics_descend_to_the_smoothed_clipped_double_q_target_and_the_actor_waits_its_turn():
    trainer = TD3(config={**SMALL, "seed": 0, "target_noise": 0.3, "target_noise_clip": 0.4})
    try:
        policy, batch = trainer.policy, _batch()
        state = trainer.torch_rng.get_state()
        with torch.no_grad():  # the target by hand: the target actor's action, noise clipped, then the action clipped
            noise = torch.randn((8, 1), generator=torch.Generator().set_state(state))
            next_actions = (policy.target_actor(batch["next_obs"]) + (0.3 * noise).clamp(-0.4, 0.4)).clamp(-1, 1)
            next_q = torch.minimum(*policy.target_critic(batch["next_obs"], next_actions))
            y = batch["rewards"] + batch["discounts"] * next_q
            q1, q2 = policy.critic(batch["obs"], batch["actions"])
            expected = ((q1 - y) ** 2).mean() + ((q2 - y) ** 2).mean()
        actor_before = [p.clone() for p in policy.actor.parameters()]
        targets_before = [p.clone() for p in (*policy.target_actor.parameters(), *policy.target_critic.parameters())]
        stats = trainer.update(batch)
        trainer.num_updates += 1
        assert float(stats["critic_loss"]) == pytest.approx(float(expected), rel=1e-4)
        assert np.isnan(float(stats["actor_loss"]))  # policy_delay 2: not the actor's turn yet
        for before, now in zip(actor_before, policy.actor.parameters()):
            torch.testing.assert_close(now, before)
        for before, now in zip(targets_before, (*policy.target_actor.parameters(), *policy.target_critic.parameters())):
            torch.testing.assert_close(now, before)
        # the second update: the actor ascends the updated Q1 of its own action, then both targets move by tau
        actor = copy.deepcopy(policy.actor)
        stats = trainer.update(batch)
        with torch.no_grad():
            expected_actor_loss = -policy.critic(batch["obs"], actor(batch["obs"]))[0].mean()
        assert float(stats["actor_loss"]) == pytest.approx(float(expected_actor_loss), rel=1e-5)
        assert any(not torch.equal(b, p) for b, p in zip(actor_before, policy.actor.parameters()))
        tau = trainer.cfg["tau"]
        learnt = (*policy.actor.parameters(), *policy.critic.parameters())
        for before, t, p in zip(targets_before, (*policy.target_actor.parameters(),
                                                 *policy.target_critic.parameters()), learnt):
            torch.testing.assert_close(t, before + tau * (p - before))
    finally:
        trainer.stop()


def test_ddpg_targets_use_one_critic_and_the_target_actors_own_action():
    trainer = DDPG(config={**SMALL, "seed": 0})
    try:
        policy, batch = trainer.policy, _batch()
        with torch.no_grad():
            (next_q,) = policy.target_critic(batch["next_obs"], policy.target_actor(batch["next_obs"]))
            y = batch["rewards"] + batch["discounts"] * next_q
            (q,) = policy.critic(batch["obs"], batch["actions"])
        stats = trainer.update(batch)
        assert float(stats["critic_loss"]) == pytest.approx(float(((q - y) ** 2).mean()), rel=1e-4)
        assert np.isfinite(float(stats["actor_loss"]))  # policy_delay 1: every update
    finally:
        trainer.stop()


def test_exploration_adds_clipped_gaussian_noise_to_the_actors_action_within_the_env_bounds():
    trainer = TD3(config={**SMALL, "seed": 0, "learning_starts": 0, "exploration_config": {"stddev": 0.5}})
    try:
        obs = np.random.default_rng(1).normal(size=(4000, 3)).astype(np.float32)
        greedy = trainer.compute_actions(obs, explore=False)
        explored = trainer.compute_actions(obs, explore=True, seed=0)
        assert np.all(np.abs(explored) <= 2.0) and np.all(np.abs(greedy) <= 2.0)  # Pendulum's torque bounds
        inside = np.abs(greedy[:, 0]) < 0.5  # far from the bounds, where clipping seldom bites
        noise = (explored - greedy)[inside, 0] / 2.0  # back in the actions' [-1, 1] units
        assert noise.std() == pytest.approx(0.5, rel=0.1) and abs(noise.mean()) < 0.05
    finally:
        trainer.stop()


@pytest.mark.parametrize("cls", [TD3, DDPG])
def test_checkpoint_round_trip_restores_the_actor_and_both_targets(tmp_path, cls):
    config = {**SMALL, "seed": 0}
    trainer = cls(config=config)
    try:
        for _ in range(3):
            trainer.train()
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(16, 3)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        targets = {k: v.clone() for k, v in trainer.policy.target_actor.state_dict().items()}
        updates = trainer.num_updates
    finally:
        trainer.stop()
    restored = cls(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_allclose(restored.compute_actions(obs, explore=False), actions)
        for key, value in restored.policy.target_actor.state_dict().items():
            torch.testing.assert_close(value, targets[key])
        assert restored.num_updates == updates
    finally:
        restored.stop()


def make_actor_module(observation_space, action_space, model_config):
    """A user's deterministic actor: pre-tanh actions (and a value, unused)."""
    class Actor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = torch.nn.Sequential(torch.nn.Linear(observation_space.shape[0], 32), torch.nn.LayerNorm(32),
                                             torch.nn.ReLU())
            self.pi = torch.nn.Linear(32, action_space.shape[0])
            self.vf = torch.nn.Linear(32, 1)

        def forward(self, obs):
            h = self.trunk(obs)
            return self.pi(h), self.vf(h)[:, 0]

    return Actor()


def make_wrong_actor(observation_space, action_space, model_config):
    return torch.nn.Linear(observation_space.shape[0], 2)  # a Gaussian's mean and log std: SAC's contract


@pytest.mark.usefixtures("ray_session")
def test_an_actor_of_ones_own_learns_on_rollout_actors_within_bounds_and_round_trips(tmp_path):
    config = {**{k: v for k, v in SMALL.items() if k != "hidden_sizes"}, "seed": 0, "model": make_actor_module,
              "num_workers": 2}
    trainer = TD3(config=config)
    try:
        first = trainer.train()
        result = trainer.train()
        assert result["num_updates"] > first["num_updates"] > 0
        assert isinstance(trainer.policy.actor.module.trunk[1], torch.nn.LayerNorm)
        assert np.all(np.abs(trainer.buffer.state()["actions"]) <= 1.0)  # the buffer keeps [-1, 1] actions
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
    finally:
        trainer.stop()
    restored = TD3(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_allclose(restored.compute_actions(obs, explore=False), actions, rtol=1e-6)
    finally:
        restored.stop()


def test_an_actor_with_the_wrong_output_shape_is_one_error_naming_model_before_sampling():
    with pytest.raises(ValueError, match=r"config key 'model' \(make_wrong_actor\): a deterministic actor's "
                                         r"forward\(obs\) must return actions of shape \(batch, 1\).*got a tensor "
                                         r"of shape \(2, 2\)"):
        TD3(config={"env": "Pendulum-v1", "model": make_wrong_actor})


#: Pendulum's swing-up within 7,000 env steps: a random policy scores about -1,200 an episode.
LEARNS = {"env": "Pendulum-v1", "seed": 0, "hidden_sizes": [64, 64], "gamma": 0.98, "lr": 2e-3, "learning_starts": 500,
          "train_freq": 32, "gradient_steps": 32, "train_batch_size": 128, "min_sample_timesteps_per_iteration": 1000,
          "metrics_num_episodes_for_smoothing": 5, "num_workers": 2, "num_cpus_per_worker": 0.5,
          "num_cpus_for_learner": 1}


@pytest.mark.usefixtures("ray_session")
def test_td3_learns_pendulum_with_rollout_actors():
    trainer = TD3(config=LEARNS)
    try:
        results = [trainer.train() for _ in range(7)]
    finally:
        trainer.stop()
    returns = [r["episode_return_mean"] for r in results]
    assert results[-1]["env_steps_total"] >= 7000 and returns[0] < -900, returns
    assert max(returns[-2:]) > -400, returns
