"""A2C: config errors, the update by hand, checkpoints, a user's model (learning CartPole with
rollout actors: tests/examples/test_a2c.py; ASHA and PBT sweeps: tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import A2C
from algorithms.data.observations import to_tensors

SMALL = {"env": "CartPole-v1", "num_envs_per_worker": 4, "train_batch_size": 32, "hidden_sizes": [16],
         "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5}


def test_unknown_key_names_itself_and_lists_allowed_keys():
    with pytest.raises(ValueError, match=r"A2C config: unknown key 'clip_param'; allowed keys: \[.*'vf_loss_coeff'"):
        A2C(config={"env": "CartPole-v1", "clip_param": 0.2})


@pytest.mark.parametrize("key, value, named, match", [
    ("gamma", 2.0, "gamma", r"must be in \(0, 1\]"),
    ("lambda", 1.5, "lambda", r"must be in \[0, 1\]"),
    ("entropy_coeff", -0.1, "entropy_coeff", "must be a number >= 0"),
    ("max_grad_norm", 0, "max_grad_norm", "must be None"),
    ("normalize_advantages", "yes", "normalize_advantages", "must be True or False"),
    ("sample_async", True, "sample_async", "must be False: A2C is synchronous"),
])
def test_bad_values_name_their_key(key, value, named, match):
    with pytest.raises(ValueError, match=rf"config key '{named}': {match}"):
        A2C(config={"env": "CartPole-v1", key: value})


def test_one_update_is_the_policy_gradient_value_and_entropy_loss_of_the_whole_batch():
    trainer = A2C(config={**SMALL, "seed": 0, "entropy_coeff": 0.01, "optimizer": "sgd", "optimizer_config": {},
                          "max_grad_norm": None, "lr": 0.1})
    try:
        batch = trainer.postprocess_fragments(trainer.sample(32))
        n = batch.env_steps
        policy = trainer.policy
        before = [p.detach().clone() for p in policy.parameters()]
        obs = to_tensors(batch.obs, "cpu")
        actions = policy.actions_tensor(torch.from_numpy(batch.actions.reshape(n, -1).astype(np.float32)))
        logp, entropy, values = policy.evaluate(obs, actions)
        advantages, returns = torch.from_numpy(batch.advantages), torch.from_numpy(batch.returns)
        loss = -(logp * advantages).mean() + 0.5 * 0.5 * (values - returns).pow(2).mean() - 0.01 * entropy.mean()
        grads = torch.autograd.grad(loss, list(policy.parameters()))
        stats = trainer.learn_on_batch(batch)
        assert stats["policy_loss"] == pytest.approx(float(-(logp * advantages).mean()), rel=1e-5)
        for b, g, p in zip(before, grads, policy.parameters()):  # plain SGD: one step of lr along the gradient
            torch.testing.assert_close(p.detach(), b - 0.1 * g, rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


def test_checkpoint_round_trip(tmp_path):
    trainer = A2C(config={**SMALL, "seed": 0})
    try:
        for _ in range(3):
            trainer.train()
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        moments = [s["square_avg"].clone() for s in trainer.optimizer.state.values()]
    finally:
        trainer.stop()
    restored = A2C(config={**SMALL, "seed": 0})
    try:
        restored.restore(saved)
        np.testing.assert_array_equal(restored.compute_actions(obs, explore=False), actions)
        for saved_moment, state in zip(moments, restored.optimizer.state.values()):
            torch.testing.assert_close(state["square_avg"], saved_moment)  # RMSprop's, restored
        assert restored.train()["env_steps_total"] > 0
    finally:
        restored.stop()


def test_a_user_model_learns_and_a_new_lr_applies_in_place():
    from tests.algorithms.models.test_models import make_my_model

    trainer = A2C(config={"env": "CartPole-v1", "seed": 0, "model": make_my_model})
    try:
        assert trainer.train()["env_steps_total"] > 0
        assert trainer.reset_config({**trainer.config, "lr": 1e-4}) is True
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
    finally:
        trainer.stop()
