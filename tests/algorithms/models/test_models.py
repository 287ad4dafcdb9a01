"""The model contract: a user's torch module in PPO, on every action space, through tune.run, with
rollout actors, checkpoints and PBT; and one clear error for a module that breaks the contract."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from algorithms.data.observations import batch_of, to_tensors
from algorithms import PPO, register_env
from schedulers import PopulationBasedTraining
from tuner import tune

SMALL = {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 2, "num_envs_per_worker": 4}
#: The test envs below are contextual bandits: a reward depends on the last action alone, so a short
#: horizon keeps the other steps' rewards out of each advantage.
BANDIT = {"gamma": 0.5, "lr": 3e-3, "num_epochs": 4}


# -- user modules, as a user writes them ----------------------------------------------------------
def make_my_model(observation_space, action_space, model_config):
    """relu + LayerNorm on a trunk shared by the policy and value heads."""
    width = model_config.get("width", 64)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(observation_space.shape[0], width), nn.LayerNorm(width), nn.ReLU(),
                                       nn.Linear(width, width), nn.ReLU())
            self.pi = nn.Linear(width, action_space.n)
            self.vf = nn.Linear(width, 1)

        def forward(self, obs):
            h = self.trunk(obs)
            return self.pi(h), self.vf(h)

    return Net()


def make_cnn(observation_space, action_space, model_config):
    """A CNN over (H, W, C) uint8 images."""
    h, w, c = observation_space.shape

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2d(c, 8, 3, padding=1), nn.ReLU(), nn.Flatten())
            self.pi = nn.Linear(8 * h * w, action_space.n)
            self.vf = nn.Linear(8 * h * w, 1)

        def forward(self, obs):
            x = self.conv(obs.permute(0, 3, 1, 2) / 255.0)
            return self.pi(x), self.vf(x)[:, 0]

    return Net()


def make_flat_model(observation_space, action_space, model_config):
    """Any action space: an MLP with as many outputs as the contract asks for (model_config["outputs"])."""
    return _Flat(int(np.prod(observation_space.shape)), model_config["outputs"])


class _Flat(nn.Module):
    def __init__(self, inputs, outputs):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(inputs, 32), nn.Tanh())
        self.pi = nn.Linear(32, outputs)
        self.vf = nn.Linear(32, 1)

    def forward(self, obs):
        h = self.body(obs.reshape(len(obs), -1))
        return self.pi(h), self.vf(h)


class PixelSideEnv(gym.Env):
    """An 6x6 RGB image with one bright pixel: action 0 when it is in the left half, 1 in the right.
    Ten images per episode, reward 1 for each right answer (a coin flip earns 5)."""

    observation_space = gym.spaces.Box(0, 255, (6, 6, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def _draw(self):
        self.side = int(self.np_random.integers(2))
        image = np.zeros((6, 6, 3), np.uint8)
        image[self.np_random.integers(6), self.side * 3 + self.np_random.integers(3)] = 255
        return image

    def step(self, action):
        reward = float(action == self.side)
        self.t += 1
        return self._draw(), reward, False, self.t >= 10, {}


class MatchTwoEnv(gym.Env):
    """MultiDiscrete([3, 2]) actions: name the two targets the observation shows (one-hot), one point each."""

    observation_space = gym.spaces.Box(0, 1, (5,), np.float32)
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def _draw(self):
        self.target = (int(self.np_random.integers(3)), int(self.np_random.integers(2)))
        obs = np.zeros(5, np.float32)
        obs[self.target[0]] = obs[3 + self.target[1]] = 1.0
        return obs

    def step(self, action):
        reward = float(action[0] == self.target[0]) + float(action[1] == self.target[1])
        self.t += 1
        return self._draw(), reward, False, self.t >= 10, {}


register_env("pixel-side", lambda cfg: PixelSideEnv())
register_env("match-two", lambda cfg: MatchTwoEnv())


def _train_until(trainer, episode_return, max_iterations):
    for _ in range(max_iterations):
        result = trainer.train()
        if result["episode_return_mean"] >= episode_return:
            break
    return result


# -- learning ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_workers, goal", [(0, 475), (2, 200)], ids=["in-process", "rollout-actors"])
def test_a_user_module_learns_cartpole_through_tune_run(ray_session, tmp_path, num_workers, goal):
    """It solves CartPole in the learner's process; through rollout actors it learns (a random
    policy scores about 22): the same module and learner, on a shorter run."""
    analysis = tune.run(
        "PPO",
        config={"env": "CartPole-v1", "seed": 0, "model": make_my_model, "model_config": {"width": 64},
                "num_workers": num_workers, "num_envs_per_worker": 16 // max(1, num_workers)},
        stop={"episode_return_mean": goal, "env_steps_total": 200_000},
        metric="episode_return_mean", mode="max", storage_path=str(tmp_path), name="mine", verbose=0,
    )
    last = analysis.trials[0].last_result
    assert analysis.trials[0].status == "TERMINATED"
    assert last["episode_return_mean"] >= goal, last["env_steps_total"]
    assert last["learner"] == "torch" and last["learner_device"] == "cpu"
    assert last["sampling_layout"].startswith("in the learner" if not num_workers else "2 rollout actors")


def test_a_cnn_learns_on_a_pixel_env():
    trainer = PPO(config={"env": "pixel-side", "seed": 0, "model": make_cnn, **SMALL, **BANDIT})
    try:
        first = trainer.train()
        result = _train_until(trainer, 9.0, 40)
        assert first["episode_return_mean"] < 7.0
        assert result["episode_return_mean"] >= 9.0, result["env_steps_total"]
    finally:
        trainer.stop()


def test_multidiscrete_actions_learn_with_a_user_module_and_the_built_in_one():
    for model, extra in ((make_flat_model, {"model_config": {"outputs": 5}}), ({"shared_layers": False}, {})):
        trainer = PPO(config={"env": "match-two", "seed": 1, "model": model, **extra, **SMALL, **BANDIT})
        try:
            result = _train_until(trainer, 17.0, 60)
            assert result["episode_return_mean"] >= 17.0, (model, result["env_steps_total"])  # random: 8.3
            assert result["learner"] == "torch"
        finally:
            trainer.stop()


@pytest.mark.parametrize("env, model, model_config", [
    ("Pendulum-v1", make_flat_model, {"outputs": 2}),
    ("match-two", make_flat_model, {"outputs": 5}),
    ("CartPole-v1", make_my_model, {}),
    ("Pendulum-v1", {"shared_layers": True}, {}),
])
def test_rollout_log_probs_and_values_match_the_learner(env, model, model_config):
    """What TorchPolicy.act samples with (numpy) and what the loss evaluates (torch) agree, and
    Box actions reach the env inside its bounds."""
    trainer = PPO(config={"env": env, "seed": 0, "model": model, "model_config": model_config, **SMALL})
    try:
        trainer.train()
        policy = trainer.policy
        observation_space = trainer.observation_space
        observation_space.seed(0)
        obs = batch_of(observation_space, [observation_space.sample() for _ in range(32)])  # as envs give them
        env_actions, actions, logp, values = policy.act(obs, np.random.default_rng(1))
        columns = torch.from_numpy(np.asarray(actions, dtype=np.float32).reshape(32, -1))
        with torch.no_grad():
            torch_logp, entropy, torch_values = policy.evaluate(to_tensors(obs, "cpu"), policy.actions_tensor(columns))
        np.testing.assert_allclose(torch_logp.numpy(), logp, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(torch_values.numpy(), values, rtol=1e-4, atol=1e-4)
        assert entropy.shape == (32,)
        space = trainer.action_space
        assert all(space.contains(np.asarray(a, dtype=space.dtype)) for a in env_actions)
    finally:
        trainer.stop()


# -- checkpoints, reset_config, PBT ---------------------------------------------------------------
def test_checkpoint_of_a_user_module_round_trips(tmp_path):
    config = {"env": "CartPole-v1", "seed": 3, "model": make_my_model, **SMALL}
    a, b = PPO(config=config), PPO(config={**config, "seed": 4})
    try:
        for _ in range(2):
            a.train()
        path = a.save(str(tmp_path / "ckpt"))
        b.restore(path)
        obs = np.random.default_rng(1).normal(scale=0.1, size=(256, 4)).astype(np.float32)
        np.testing.assert_array_equal(a.compute_actions(obs, explore=False), b.compute_actions(obs, explore=False))
        np.testing.assert_array_equal(a.compute_actions(obs, seed=7), b.compute_actions(obs, seed=7))
        for pa, pb in zip(a.policy.parameters(), b.policy.parameters()):
            torch.testing.assert_close(pa, pb)
        sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
        assert sa.keys() == sb.keys() and sa
        for k in sa:
            torch.testing.assert_close(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"])
        assert b.train()["env_steps_total"] > a.env_steps_total
    finally:
        a.stop()
        b.stop()


def test_checkpoints_of_the_numpy_and_torch_learners_restore_into_each_other(tmp_path):
    config = {"env": "CartPole-v1", "seed": 3, **SMALL}
    a, b = PPO(config={**config, "learner": "numpy"}), PPO(config={**config, "learner": "torch"})
    try:
        a.train()
        b.restore(a.save(str(tmp_path / "numpy")))
        moments = b.optimizer.state_dict()["state"]
        flat = torch.cat([moments[i]["exp_avg_sq"].reshape(-1) for i in range(len(moments))])
        torch.testing.assert_close(flat, a.optimizer.exp_avg_sq)
        b.train()
        a.restore(b.save(str(tmp_path / "torch")))
        assert a.optimizer.steps == int(b.optimizer.state_dict()["state"][0]["step"])
    finally:
        a.stop()
        b.stop()


def test_reset_config_of_a_user_module_changes_lr_in_place_and_the_model_needs_a_rebuild():
    config = {"env": "CartPole-v1", "seed": 0, "model": make_my_model, **SMALL}
    trainer = PPO(config=config)
    try:
        trainer.train()
        assert trainer.reset_config({**config, "lr": 1e-4}) is True
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
        assert trainer.train()["cur_lr"] == pytest.approx(1e-4)
        assert trainer.reset_config({**config, "model_config": {"width": 32}}) is False
    finally:
        trainer.stop()


def test_pbt_exploits_between_trials_with_a_user_module(ray_session, tmp_path):
    # synch: the whole population meets at each perturbation point, so the bottom half exploits
    # the top half however the machine's load spreads the trials out (asynchronous PBT may find
    # no live donor with a checkpoint when some trials ran far ahead)
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
                                        hyperparam_mutations={"lr": [1e-4, 3e-4, 1e-3, 3e-3]}, seed=0, synch=True)
    analysis = tune.run(
        "PPO",
        config={"env": "CartPole-v1", "model": make_my_model, "seed": tune.grid_search([0, 1]),
                "lr": tune.grid_search([1e-4, 3e-3]), **SMALL},
        scheduler=scheduler, stop={"training_iteration": 6}, metric="episode_return_mean", mode="max",
        max_concurrent_trials=4, storage_path=str(tmp_path), name="pbt", verbose=0,
    )
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    assert all(t.last_result["training_iteration"] == 6 for t in analysis.trials)
    assert analysis.exploits, "no trial exploited another"


# -- errors -------------------------------------------------------------------------------------------
def make_wrong_shape(observation_space, action_space, model_config):
    return _Flat(4, 3)  # CartPole has 2 actions


def test_a_module_with_the_wrong_output_shape_is_one_error_naming_model_before_sampling():
    with pytest.raises(ValueError, match=r"config key 'model' \(make_wrong_shape\).*dist_inputs of shape "
                                         r"\(batch, 2\).*got dist_inputs of shape \(2, 3\)"):
        PPO(config={"env": "CartPole-v1", "model": make_wrong_shape, "num_workers": 0, **SMALL})
    with pytest.raises(ValueError, match=r"config key 'model'.*must return a torch.nn.Module, got dict"):
        PPO(config={"env": "CartPole-v1", "model": lambda o, a, c: {}, **SMALL})


@pytest.mark.parametrize("config, match", [
    ({"model": {"hidden": [8]}}, r"'model': unknown built-in option\(s\) \['hidden'\]"),
    ({"model": "mlp"}, r"'model': must be a dict of built-in options"),
    ({"model": {"activation": "sigmoid"}}, r"'activation' / 'model.activation': must be one of"),
    ({"model": {"hidden_sizes": [8]}, "hidden_sizes": [16]}, r"'hidden_sizes': given twice"),
    ({"model": make_my_model, "activation": "relu"}, r"'activation': is an option of the built-in model"),
    ({"model_config": [1]}, r"'model_config': must be a dict"),
    ({"learner": "jax"}, r"'learner': must be one of \['auto', 'torch', 'numpy'\]"),
    ({"learner": "numpy", "model": make_my_model}, r"'learner': 'numpy' covers .*here a model callable"),
    ({"learner": "numpy", "activation": "relu"}, r"'learner': 'numpy' covers .*here activation 'relu'"),
    ({"learner": "numpy", "num_gpus_for_learner": 1}, r"'learner': 'numpy' covers .*here a GPU learner"),
    ({"optimizer": "lbfgs"}, r"'optimizer': must be one of \['adam', 'adamw', 'rmsprop', 'sgd'\]"),
    ({"optimizer_config": {"lr": 1e-3}}, r"'optimizer_config': holds no 'lr'"),
    ({"num_gpus_for_learner": -1}, r"'num_gpus_for_learner': must be a number >= 0"),
    ({"use_sde": True, "model": {"shared_layers": True}}, r"'use_sde': gSDE is an option of the built-in model"),
])
def test_bad_model_and_learner_keys_name_their_key(config, match):
    with pytest.raises(ValueError, match=match):
        PPO.resolve_config({"env": "CartPole-v1", **config})


def test_numpy_learner_on_box_actions_and_a_bad_optimizer_keyword_fail_at_setup():
    with pytest.raises(ValueError, match=r"'learner': 'numpy' covers .*here action space Box"):
        PPO(config={"env": "Pendulum-v1", "learner": "numpy", **SMALL})
    with pytest.raises(ValueError, match=r"'optimizer_config': SGD does not take \{'betas'"):
        PPO(config={"env": "CartPole-v1", "optimizer": "sgd", "optimizer_config": {"betas": (0.9, 0.9)}, **SMALL})


def test_other_optimizers_and_the_auto_learner_choice():
    cases = [({"optimizer": "sgd", "optimizer_config": {"momentum": 0.9}}, "torch"),
             ({"activation": "relu"}, "torch"), ({"model": {"shared_layers": True}}, "torch"),
             ({"optimizer_config": {"eps": 1e-7}}, "numpy"), ({}, "numpy")]
    for extra, learner in cases:
        trainer = PPO(config={"env": "CartPole-v1", "seed": 0, **SMALL, **extra})
        try:
            result = trainer.train()
            assert result["learner"] == learner, extra
            assert np.isfinite(result["policy_loss"])
        finally:
            trainer.stop()
