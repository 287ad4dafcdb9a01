"""PPO as a trainer and as a trial: config, learning, checkpoints, reset_config, rollout actors, tune.run."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from algorithms import PPO, register_env
from algorithms.core.trainer import STATE_FILE
from tests.algorithms.sampling.test_rollout import step_count_env

SMALL = {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 2, "num_envs_per_worker": 4}
METRICS = (
    "episode_return_mean", "episode_return_min", "episode_return_max", "episode_len_mean", "episodes_this_iter",
    "env_steps_total", "env_steps_per_s", "policy_loss", "vf_loss", "entropy", "approx_kl", "sample_time_s",
    "learn_time_s",
)


# -- config ---------------------------------------------------------------------------------
def test_unknown_key_names_itself_and_lists_allowed_keys():
    with pytest.raises(ValueError) as err:
        PPO.resolve_config({"env": "CartPole-v1", "learning_rate": 1e-3})
    message = str(err.value)
    assert "'learning_rate'" in message and "'lr'" in message and "'entropy_coeff'" in message


@pytest.mark.parametrize(
    "key, value",
    [
        ("lr", 0), ("lr", -1e-3), ("gamma", 0.0), ("gamma", 1.5), ("lambda", 1.2), ("clip_param", 0),
        ("minibatch_size", 4096), ("num_epochs", 0), ("num_workers", -1), ("num_envs_per_worker", 0),
        ("vf_clip_param", -1.0), ("entropy_coeff", -0.1), ("hidden_sizes", [64, 0]), ("activation", "sigmoid"),
        ("lr_schedule", "cosine"), ("train_batch_size", 0), ("num_cpus_per_worker", -0.5), ("sample_async", 1),
        ("max_requests_in_flight_per_worker", 0), ("env", None),
    ],
)
def test_bad_values_name_their_key(key, value):
    config = {"env": "CartPole-v1", key: value}
    with pytest.raises(ValueError, match=f"'{key}'"):
        PPO.resolve_config(config)


def test_config_aliases_defaults_and_resource_request():
    c = PPO.resolve_config({"env": "CartPole-v1", "lambda": 0.9, "train_batch_size": 256})
    assert c["lambda_"] == 0.9 and c["minibatch_size"] == 256  # default minibatch capped at the batch
    with pytest.raises(ValueError, match="given twice"):
        PPO.resolve_config({"env": "CartPole-v1", "lambda": 0.9, "lambda_": 0.8})
    assert PPO.default_resource_request({"env": "CartPole-v1"}) == [{"CPU": 1.0}]
    bundles = PPO.default_resource_request(
        {"env": "CartPole-v1", "num_workers": 2, "num_cpus_for_learner": 0.5, "num_cpus_per_worker": 0.25}
    )
    assert bundles == [{"CPU": 0.5}, {"CPU": 0.25}, {"CPU": 0.25}]


# -- learning, discrete and continuous --------------------------------------------------------
def test_cartpole_trains_and_reports_every_metric():
    trainer = PPO(config={"env": "CartPole-v1", "seed": 0, **SMALL})
    try:
        results = [trainer.train() for _ in range(3)]
    finally:
        trainer.stop()
    last = results[-1]
    for key in METRICS:
        assert key in last and math.isfinite(last[key]), key
    assert [r["env_steps_total"] for r in results] == sorted(r["env_steps_total"] for r in results)
    assert 0 < last["env_steps_total"] <= 3 * 256
    assert last["entropy"] <= math.log(2) + 1e-6


def test_pendulum_continuous_actions_train_and_stay_in_bounds():
    trainer = PPO(config={"env": "Pendulum-v1", "seed": 0, "gamma": 0.9, **SMALL})
    try:
        for _ in range(2):
            result = trainer.train()
        assert math.isfinite(result["policy_loss"]) and math.isfinite(result["vf_loss"])
        assert result["episodes_this_iter"] == 0 or result["episode_len_mean"] == 200  # time limit: truncation
        actions = trainer.compute_actions(np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32), seed=0)
        assert actions.shape == (64, 1) and np.all(np.abs(actions) <= 2.0)
    finally:
        trainer.stop()


@pytest.mark.parametrize("env, extra", [
    ("CartPole-v1", {}), ("Pendulum-v1", {}), ("Pendulum-v1", {"use_sde": True, "sde_sample_freq": 4}),
])
def test_rollout_log_probs_and_values_match_the_learner(env, extra):
    """The numpy forward of the rollouts and the torch one of the learner agree (ratio 1 at first)."""
    import gymnasium as gym

    from algorithms.ppo.model import make_actor_critic

    trainer = PPO(config={"env": env, "seed": 0, **SMALL, **extra})
    try:
        trainer.train()  # weights away from their init
        policy = trainer.policy
        obs = np.random.default_rng(0).normal(size=(32, policy.obs_dim)).astype(np.float32)
        _, actions, logp, values = policy.act(obs, np.random.default_rng(1))
        torch_logp, entropy, torch_values = policy.evaluate(torch.from_numpy(obs), torch.from_numpy(actions))
        np.testing.assert_allclose(torch_logp.detach().numpy(), logp, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(torch_values.detach().numpy(), values, rtol=1e-4, atol=1e-4)
        twin = make_actor_critic(policy.obs_dim, gym.make(env).action_space, [64, 64], "tanh", inference="torch",
                                 sde=policy.sde, sde_sample_freq=policy.sde_sample_freq)
        twin.load_weights(policy.get_weights())
        _, actions_t, logp_t, _ = twin.act(obs, np.random.default_rng(1))
        np.testing.assert_allclose(actions_t, actions, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(logp_t, logp, rtol=1e-4, atol=1e-4)
    finally:
        trainer.stop()


def test_sde_needs_box_actions():
    with pytest.raises(ValueError, match="'use_sde'"):
        PPO(config={"env": "CartPole-v1", "use_sde": True, **SMALL})


# -- checkpoints and reset_config -------------------------------------------------------------
def test_checkpoint_round_trip_gives_the_same_actions(tmp_path):
    config = {"env": "CartPole-v1", "seed": 3, **SMALL}
    a = PPO(config=config)
    b = PPO(config={**config, "seed": 4})
    try:
        for _ in range(2):
            a.train()
        path = a.save(str(tmp_path / "ckpt"))
        state = torch.load(os.path.join(path, STATE_FILE), weights_only=True)  # tensors and plain data only
        assert set(state) >= {"policy", "learner", "counters", "episode_window"}
        obs = np.random.default_rng(1).normal(scale=0.1, size=(256, 4)).astype(np.float32)
        b.restore(path)
        np.testing.assert_array_equal(a.compute_actions(obs, explore=False), b.compute_actions(obs, explore=False))
        np.testing.assert_array_equal(a.compute_actions(obs, seed=7), b.compute_actions(obs, seed=7))
        assert b.env_steps_total == a.env_steps_total and b.iteration == a.iteration == 2
        assert b.window.metrics() == a.window.metrics()
        for pa, pb in zip(a.policy.parameters(), b.policy.parameters()):
            torch.testing.assert_close(pa, pb)
        sa, sb = a.optimizer.state_dict(), b.optimizer.state_dict()
        torch.testing.assert_close(sa["exp_avg"], sb["exp_avg"])
        torch.testing.assert_close(sa["exp_avg_sq"], sb["exp_avg_sq"])
        assert sa["steps"] == sb["steps"] > 0
        assert b.train()["env_steps_total"] > a.env_steps_total  # and it trains on
    finally:
        a.stop()
        b.stop()


def test_reset_config_applies_lr_entropy_clip_in_place_and_refuses_structural_changes(tmp_path):
    config = {"env": "CartPole-v1", "seed": 0, "lr": 1e-3, **SMALL}
    trainer = PPO(config=config)
    try:
        trainer.train()
        donor = trainer.save(str(tmp_path / "donor"))  # its optimizer state holds lr 1e-3
        assert trainer.reset_config({**config, "lr": 5e-4, "entropy_coeff": 0.01, "clip_param": 0.1, "gamma": 0.98})
        assert trainer.optimizer.lr == 5e-4
        assert trainer.cfg["entropy_coeff"] == 0.01 and trainer.cfg["clip_param"] == 0.1
        assert trainer.train()["cur_lr"] == 5e-4
        # PBT exploit: restore the donor, then the new config wins over the donor's optimizer state.
        trainer.restore(donor)
        assert trainer.reset_config({**config, "lr": 2e-4})
        assert trainer.optimizer.lr == 2e-4
        assert trainer.reset_config({**config, "lr": 2e-4, "lr_schedule": ("linear", 10_000)})
        assert trainer.current_lr() < 2e-4
        assert trainer.reset_config({**config, "hidden_sizes": [32, 32]}) is False
        assert trainer.reset_config({**config, "num_workers": 2}) is False
        assert trainer.reset_config({**config, "env": "Pendulum-v1"}) is False
        with pytest.raises(ValueError, match="'lr'"):
            trainer.reset_config({**config, "lr": -1.0})
    finally:
        trainer.stop()


# -- rollout actors (Ray) -----------------------------------------------------------------------
def test_the_rollout_actors_policy_is_known_before_the_learner_imports_torch():
    """A trial starts its rollout actors, and they sample, while its learner imports torch (a
    second of a trial's start): so the actors' policy and first weights come without torch."""
    import subprocess
    import sys

    code = """
import sys
from algorithms.ppo.trainer import PPO
prepared = PPO.prepare_trial({"env": "CartPole-v1", "num_workers": 1, "num_envs_per_worker": 2, "seed": 3})
trainer = PPO.__new__(PPO)  # setup's first part alone: no Ray, no actors
trainer.cfg, trainer.seed, trainer._initial_weights = prepared.config, 3, None
factory, kwargs, weights = trainer.rollout_policy(prepared.observation_space, prepared.action_space)
factory(**kwargs).load_weights(weights)
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "torch")
assert not loaded, loaded[:5]
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.usefixtures("ray_session")
def test_killed_rollout_actor_is_replaced_and_training_goes_on():
    import ray

    trainer = PPO(config={"env": "CartPole-v1", "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.5, **SMALL})
    try:
        first = trainer.train()
        victim = trainer.workers.actors[1]
        ray.kill(victim)
        result = trainer.train()
        assert result["num_worker_restarts"] == 1
        assert trainer.workers.actors[1] is not victim
        # The iteration still got a full batch: two fragments of 32 steps of 4 envs each.
        assert result["env_steps_this_iter"] > 0.8 * 256
        assert result["env_steps_total"] > first["env_steps_total"]
        assert trainer.train()["num_worker_restarts"] == 1
    finally:
        trainer.stop()


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("requests", [None, 2], ids=["streams", "requests"])
def test_async_sampling_with_a_registered_env_on_rollout_actors_survives_a_kill(requests):
    import ray

    register_env("step-count-async", step_count_env)  # published to the cluster for the actors
    trainer = PPO(config={"env": "step-count-async", "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.5,
                          "sample_async": True, "max_requests_in_flight_per_worker": requests, **SMALL})
    try:
        results = [trainer.train() for _ in range(2)]
        ray.kill(trainer.workers.actors[2])  # its stream, or its two queued requests, fail: one replacement
        results += [trainer.train() for _ in range(3)]
        assert all(r["env_steps_this_iter"] > 0.5 * 256 for r in results)  # short episodes: 1 reset step in 4
        assert all(r["env_steps_this_iter"] <= 1.05 * 256 for r in results)  # streams: no big first batch either
        assert results[-1]["num_worker_restarts"] == 1
        assert results[-1]["episode_return_max"] <= 5 and results[-1]["episode_return_min"] >= 1
    finally:
        trainer.stop()


@pytest.mark.usefixtures("ray_session")
def test_ppo_trials_with_rollout_actors_share_the_machine_in_tune_run(tmp_path):
    from tuner import tune

    register_env("step-count-tune", step_count_env)
    analysis = tune.run(
        "PPO",
        config={
            "env": tune.grid_search(["CartPole-v1", "step-count-tune"]),
            "num_workers": 2,
            "num_cpus_for_learner": 0.5,
            "num_cpus_per_worker": 0.25,
            "seed": 0,
            **SMALL,
        },
        stop={"training_iteration": 2},
        metric="episode_return_mean",
        mode="max",
        storage_path=str(tmp_path),
        name="ppo_nested",
        verbose=0,
    )
    trials = analysis.trials
    assert len(trials) == 2 and {t.status for t in trials} == {"TERMINATED"}
    df = analysis.results_df
    assert len(df) == 4 and df["env_steps_total"].gt(0).all()
    assert set(df["num_worker_restarts"]) == {0}
    with pytest.raises(ValueError, match="unknown key 'learning_rate'"):  # before any trial starts
        tune.run("PPO", config={"env": "CartPole-v1", "learning_rate": 1e-3}, stop={"training_iteration": 1},
                 storage_path=str(tmp_path), name="ppo_bad_key", verbose=0)


def test_numpy_and_torch_learners_train_alike():
    """The two learners of PPO (hand-derived gradient and FlatAdam, autograd and torch.optim.Adam)
    take the same steps, and each result says which one ran."""
    config = {"env": "CartPole-v1", "seed": 5, **SMALL, "entropy_coeff": 0.01}
    fast, slow = PPO(config={**config, "learner": "numpy"}), PPO(config={**config, "learner": "torch"})
    try:
        for _ in range(2):
            a, b = fast.train(), slow.train()
        assert (a["learner"], b["learner"]) == ("numpy", "torch")
        assert a["learner_device"] == b["learner_device"] == "cpu"
        assert a["env_steps_total"] == b["env_steps_total"]
        for pa, pb in zip(fast.policy.parameters(), slow.policy.parameters()):
            torch.testing.assert_close(pa, pb, rtol=1e-3, atol=1e-5)
    finally:
        fast.stop()
        slow.stop()
