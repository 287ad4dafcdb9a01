"""The learner's correction for fragments sampled with older weights, against a by-hand computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import PPO
from algorithms.sampling.fragment import Fragment
from tests.algorithms.sampling.test_rollout import reference_gae

T, N = 6, 3
GAMMA, LAMBDA, CLIP = 0.97, 0.9, 1.5


def _trainer(**config):
    return PPO(config={"env": "CartPole-v1", "seed": 0, "num_envs_per_worker": 2, "train_batch_size": 64,
                       "minibatch_size": 64, "num_epochs": 1, "gamma": GAMMA, "lambda": LAMBDA,
                       "is_ratio_clip": CLIP, **config})


def _fragment(rng, weights_version):
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    valid = np.ones((T, N), bool)
    terminated[2, 0] = True  # env 0 ends at t=2, resets (an invalid step) at t=3
    valid[3, 0] = False
    truncated[4, 1] = True  # env 1 is cut off at t=4 (bootstraps from the value at its reset step)
    valid[5, 1] = False
    return Fragment(
        obs=rng.normal(size=(T, N, 4)).astype(np.float32), actions=rng.integers(0, 2, size=(T, N)),
        logp=rng.uniform(-1.2, -0.2, size=(T, N)).astype(np.float32),  # the behaviour policy's
        values=rng.normal(size=(T, N)).astype(np.float32),  # the behaviour-time values: to be replaced
        rewards=rng.normal(size=(T, N)).astype(np.float32), terminated=terminated, truncated=truncated,
        valid=valid, last_obs=rng.normal(size=(N, 4)).astype(np.float32),
        last_values=rng.normal(size=N).astype(np.float32), episode_returns=np.zeros(0),
        episode_lens=np.zeros(0, np.int64), weights_version=weights_version,
    )


def _by_hand(policy, obs):
    """The stacked tanh MLPs, one sample at a time: (log-softmax of the logits, value)."""
    weights = {k: v.detach().numpy().astype(np.float64) for k, v in policy.state_dict().items()}
    layers = len([k for k in weights if k.startswith("weights.")])
    out = []
    for x in obs.astype(np.float64):
        heads = []
        for net in (0, 1):
            h = x
            for k in range(layers):
                h = h @ weights[f"weights.{k}"][net] + weights[f"biases.{k}"][net][0]
                if k < layers - 1:
                    h = np.tanh(h)
            heads.append(h)
        logits = heads[0]
        out.append((logits - np.log(np.exp(logits).sum()), heads[1][0]))
    return out


def test_a_stale_fragment_is_judged_by_the_current_policy(ray_session):
    trainer = _trainer()
    try:
        rng = np.random.default_rng(0)
        fragment = _fragment(rng, weights_version=trainer.workers.weights_version - 1)
        behaviour = fragment.logp.copy()
        obs, actions, valid = fragment.obs, fragment.actions, fragment.valid
        batch = trainer.postprocess_fragments([fragment])
        np.testing.assert_array_equal(fragment.logp, behaviour)  # the fragment itself is left as sampled

        current = _by_hand(trainer.policy, obs.reshape(T * N, 4))
        logp = np.array([lp[a] for (lp, _), a in zip(current, actions.reshape(-1))]).reshape(T, N)
        values = np.array([v for _, v in current]).reshape(T, N)
        last = np.array([v for _, v in _by_hand(trainer.policy, fragment.last_obs)])
        adv = reference_gae(values, fragment.rewards, fragment.terminated, fragment.truncated, valid, last,
                            GAMMA, LAMBDA)
        mask = valid.reshape(-1)
        flat = lambda x: x.reshape(-1)[mask]  # noqa: E731
        np.testing.assert_allclose(batch.logp, flat(logp), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch.values, flat(values), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch.advantages, flat(adv), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(batch.returns, flat(adv + values), rtol=1e-4, atol=1e-4)
        weights = np.minimum(np.exp(flat(logp) - flat(behaviour)), CLIP)
        np.testing.assert_allclose(batch.is_weight, weights, rtol=1e-5)
        assert (weights == CLIP).any() and (weights < 1).any()  # both sides of the clip are exercised
        assert batch.stale_steps == mask.sum()
    finally:
        trainer.stop()


def test_a_current_fragment_keeps_its_own_log_probabilities_and_values(ray_session):
    trainer = _trainer()
    try:
        fragment = _fragment(np.random.default_rng(1), weights_version=trainer.workers.weights_version)
        batch = trainer.postprocess_fragments([fragment])
        mask = fragment.valid.reshape(-1)
        np.testing.assert_array_equal(batch.logp, fragment.logp.reshape(-1)[mask])
        np.testing.assert_array_equal(batch.values, fragment.values.reshape(-1)[mask])
        assert batch.stale_steps == 0 and (batch.is_weight == 1).all()
    finally:
        trainer.stop()


@pytest.mark.parametrize("learner", ["numpy", "torch"])
def test_the_update_weights_each_sample_by_its_importance_weight(ray_session, learner):
    """One update on a stale batch equals one on the same batch with its advantages multiplied by
    the weights (advantages not normalised, so that the two are the same objective)."""
    rng = np.random.default_rng(2)
    stale = _trainer(normalize_advantages=False, learner=learner)
    plain = _trainer(normalize_advantages=False, learner=learner)
    try:
        batch = stale.postprocess_fragments([_fragment(rng, weights_version=stale.workers.weights_version - 1)])
        same = batch.replace(advantages=batch.advantages * batch.is_weight, is_weight=np.ones_like(batch.is_weight),
                             stale_steps=0)
        torch.manual_seed(0)
        stale.learn_on_batch(batch)
        plain.learn_on_batch(same)
        for a, b in zip(stale.policy.parameters(), plain.policy.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    finally:
        stale.stop()
        plain.stop()
