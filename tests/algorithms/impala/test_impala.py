"""IMPALA and APPO: config errors, one update by hand, APPO's target policy, checkpoints, a user's
model (learning CartPole with streaming rollout actors: test_impala_learns.py; ASHA and PBT sweeps:
tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import APPO, IMPALA
from algorithms.data.vtrace import vtrace
from algorithms.impala.trainer import FragmentRows

#: Sampling in the learner's process (num_workers 0): one batch is one fragment, the test's to read.
SMALL = {"env": "CartPole-v1", "num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 32,
         "min_sample_timesteps_per_iteration": 64, "hidden_sizes": [16], "num_cpus_for_learner": 0.5}


@pytest.mark.parametrize("cls, foreign", [(IMPALA, "clip_param"), (APPO, "lambda")])
def test_unknown_key_names_itself_and_lists_allowed_keys(cls, foreign):
    with pytest.raises(ValueError, match=rf"{cls.__name__} config: unknown key '{foreign}'; allowed keys: \[.*'vf_loss_coeff'"):
        cls(config={"env": "CartPole-v1", foreign: 0.2})


@pytest.mark.parametrize("cls, key, value, match", [
    (IMPALA, "gamma", 2.0, r"must be in \(0, 1\]"),
    (IMPALA, "vtrace_clip_rho_threshold", 0, "must be a number > 0"),
    (IMPALA, "grad_clip", -1, "must be None"),
    (IMPALA, "min_sample_timesteps_per_iteration", 0.5, "must be an int >= 0"),
    (IMPALA, "max_requests_in_flight_per_worker", 2, "must be None: IMPALA's rollout actors stream"),
    (APPO, "clip_param", 0, "must be a number > 0"),
    (APPO, "target_network_update_freq", 0, "must be an int >= 1"),
    (APPO, "num_epochs", 1.5, "must be an int >= 1"),
])
def test_bad_values_name_their_key(cls, key, value, match):
    with pytest.raises(ValueError, match=rf"config key '{key}': {match}"):
        cls(config={"env": "CartPole-v1", key: value})


def _rows(trainer):
    fragments = trainer.sample(trainer.cfg["train_batch_size"])
    return fragments, FragmentRows(fragments, trainer.policy, trainer.device)


def test_one_update_is_the_vtrace_policy_gradient_value_and_entropy_loss():
    trainer = IMPALA(config={**SMALL, "seed": 0, "optimizer": "sgd", "optimizer_config": {}, "grad_clip": None,
                             "lr": 0.1, "entropy_coeff": 0.01, "vf_loss_coeff": 0.5, "gamma": 0.9})
    try:
        (fragment,), rows = _rows(trainer)
        policy = trainer.policy
        # the behaviour policy is another: V-trace's ratios are not 1 and its clipping bites
        fragment = fragment.replace(logp=fragment.logp + np.random.default_rng(0).normal(scale=0.5, size=fragment.logp.shape)
                                    .astype(np.float32))
        rows = FragmentRows([fragment], policy, "cpu")
        before = [p.detach().clone() for p in policy.parameters()]
        T, N = fragment.valid.shape
        logp, entropy, values = policy.evaluate(rows.obs, rows.actions)
        vs, adv = vtrace(behaviour_logp=fragment.logp, target_logp=logp.detach()[:T * N].numpy().reshape(T, N),
                         values=values.detach()[:T * N].numpy().reshape(T, N), last_values=values.detach()[T * N:].numpy(),
                         rewards=fragment.rewards, terminated=fragment.terminated, truncated=fragment.truncated,
                         valid=fragment.valid, gamma=0.9)
        mask = torch.from_numpy(fragment.valid.reshape(-1))
        adv, vs = torch.from_numpy(adv.reshape(-1))[mask], torch.from_numpy(vs.reshape(-1))[mask]
        lp, ent, v = logp[:T * N][mask], entropy[:T * N][mask], values[:T * N][mask]
        loss = -(lp * adv).mean() + 0.5 * 0.5 * (v - vs).pow(2).mean() - 0.01 * ent.mean()
        grads = torch.autograd.grad(loss, list(policy.parameters()))
        stats = trainer.learn_on_fragments([fragment])
        assert stats["policy_loss"] == pytest.approx(float(-(lp * adv).mean().detach()), rel=1e-5)
        assert stats["mean_rho"] != pytest.approx(1.0)
        for b, g, p in zip(before, grads, policy.parameters()):  # plain SGD: one step of lr along the gradient
            torch.testing.assert_close(p.detach(), b - 0.1 * g, rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


def test_appo_clips_the_ratio_to_its_target_policy_and_copies_it_every_freq_steps():
    trainer = APPO(config={**SMALL, "seed": 0, "optimizer": "sgd", "optimizer_config": {}, "lr": 0.5,
                           "target_network_update_freq": 3, "num_epochs": 2, "clip_param": 0.1})
    try:
        policy, target = trainer.policy, trainer.target
        (fragment,), rows = _rows(trainer)
        first = {k: v.clone() for k, v in policy.state_dict().items()}
        trainer.learn_on_fragments([fragment])  # num_epochs: two gradient steps; the target is still the first weights
        assert trainer.num_learner_updates == 2
        assert all(torch.equal(first[k], v) for k, v in target.state_dict().items())
        assert not all(torch.equal(first[k], v) for k, v in policy.state_dict().items())
        # the surrogate against the target: ratio pi / pi_target (mu / pi_target clipped at 2), clipped at 1 +- 0.1
        mask = rows.loss_mask
        logp = policy.evaluate(rows.obs, rows.actions)[0][mask]
        with torch.no_grad():
            old = target.evaluate(rows.obs, rows.actions)[0][mask]
        behaviour = rows.behaviour_logp[mask]
        adv = torch.linspace(-1, 1, int(mask.sum()))
        ratio = torch.clamp((behaviour - old).exp(), 0, 2.0) * (logp - behaviour).exp()
        want = -torch.minimum(adv * ratio, adv * ratio.clamp(0.9, 1.1)).mean()
        torch.testing.assert_close(trainer.policy_loss(rows, logp, adv), want)
        trainer.gradient_step(rows)  # the third: the policy is copied into the target
        assert all(torch.equal(policy.state_dict()[k], v) for k, v in target.state_dict().items())
    finally:
        trainer.stop()


@pytest.mark.parametrize("cls", [IMPALA, APPO])
def test_checkpoint_round_trip(cls, tmp_path):
    trainer = cls(config={**SMALL, "seed": 0})
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["env_steps_this_iter"] >= 64 and result["num_learner_updates"] >= 4
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        moments = [s["exp_avg"].clone() for s in trainer.optimizer.state.values()]
        updates = trainer.num_learner_updates
    finally:
        trainer.stop()
    restored = cls(config={**SMALL, "seed": 0})
    try:
        restored.restore(saved)
        np.testing.assert_array_equal(restored.compute_actions(obs, explore=False), actions)
        for saved_moment, state in zip(moments, restored.optimizer.state.values()):
            torch.testing.assert_close(state["exp_avg"], saved_moment)  # Adam's, restored
        assert restored.num_learner_updates == updates
        if cls is APPO:
            for a, b in zip(restored.target.parameters(), restored.policy.parameters()):
                assert a.shape == b.shape
        assert restored.train()["num_learner_updates"] > updates
    finally:
        restored.stop()


def test_a_user_model_learns_and_a_new_lr_applies_in_place():
    from tests.algorithms.models.test_models import make_my_model

    config = {k: v for k, v in SMALL.items() if k != "hidden_sizes"}
    trainer = IMPALA(config={**config, "seed": 0, "model": make_my_model})
    try:
        assert trainer.train()["env_steps_total"] > 0
        assert trainer.reset_config({**trainer.config, "lr": 1e-4}) is True
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
        assert trainer.reset_config({**trainer.config, "num_envs_per_worker": 2}) is False  # new envs: rebuilt
    finally:
        trainer.stop()
