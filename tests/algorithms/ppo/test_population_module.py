"""A user's module stacked for a PPO population (algorithms/ppo/population_module.py): one update
of the stacked copies is each member's own Adam step on its own loss, through its own module;
stack_check says which modules stack and why the others do not; each member's buffers are its own
and its checkpoint is its module's state_dict."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from algorithms.ppo.packed import ppo_state
from algorithms.ppo.population import PopulationPPO
from algorithms.ppo.population_module import build_member, stack_check
from tests.algorithms.ppo.member_models import batchnorm_model, branching_model, norm_model, wrong_width_model
from tests.algorithms.ppo.test_population import MEMBERS, SMALL

OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(2)


def _pack(model, **extra):
    config = {key: value for key, value in SMALL.items() if key != "hidden_sizes"}
    return PopulationPPO([{**config, "model": model, "model_config": {"width": 8}, **m, **extra} for m in MEMBERS])


def test_each_member_starts_as_its_module_built_from_its_seed():
    pack = _pack(norm_model)
    try:
        for m, member in enumerate(MEMBERS):
            alone = build_member(norm_model, {"width": 8}, OBS, ACTIONS, member["seed"])
            state = ppo_state(pack, m, member["seed"])["policy"]
            assert state.keys() == alone.state_dict().keys()
            for name, value in alone.state_dict().items():
                torch.testing.assert_close(state[name], value)
    finally:
        pack.stop()


def test_one_update_of_stacked_modules_is_each_members_own_adam_step():
    pack = _pack(norm_model)
    rng = np.random.default_rng(0)
    P, M = pack.P, 8
    mb = {"obs": rng.standard_normal((P, M, 4)).astype(np.float32), "actions": rng.integers(0, 2, (P, M)),
          "logp": (-rng.random((P, M)) - 0.3).astype(np.float32), "adv": rng.standard_normal((P, M)).astype(np.float32),
          "returns": rng.standard_normal((P, M)).astype(np.float32), "valid": np.ones((P, M), dtype=np.float32)}
    mb["valid"][1, :3] = 0.0  # reset rows weigh nothing
    alone = [build_member(norm_model, {"width": 8}, OBS, ACTIONS, m["seed"]) for m in MEMBERS]
    try:
        stats = pack.update(mb)
        for m, member in enumerate(MEMBERS):
            keep = mb["valid"][m].astype(bool)
            x, actions = torch.tensor(mb["obs"][m][keep]), torch.tensor(mb["actions"][m][keep])
            adv = torch.tensor(mb["adv"][m][keep])
            adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
            logits, values = alone[m](x)
            log_probs = torch.log_softmax(logits, dim=-1)
            ratio = (log_probs.gather(-1, actions[:, None])[:, 0] - torch.tensor(mb["logp"][m][keep])).exp()
            clip = member["clip_param"]
            policy_loss = -torch.minimum(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
            vf_loss = 0.5 * ((values[:, 0] - torch.tensor(mb["returns"][m][keep])) ** 2).mean()
            entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
            loss = policy_loss + member["vf_loss_coeff"] * vf_loss - member["entropy_coeff"] * entropy
            optimizer = torch.optim.Adam(alone[m].parameters(), lr=member["lr"], eps=1e-5)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(alone[m].parameters(), member["max_grad_norm"])
            optimizer.step()
            assert stats["policy_loss"][m] == pytest.approx(policy_loss.item(), rel=1e-4, abs=1e-6)
            assert stats["vf_loss"][m] == pytest.approx(vf_loss.item(), rel=1e-4, abs=1e-6)
            packed = ppo_state(pack, m, member["seed"])["policy"]
            for name, value in alone[m].state_dict().items():
                torch.testing.assert_close(packed[name], value, rtol=1e-4, atol=1e-6)
    finally:
        pack.stop()


def test_a_pack_of_modules_learns_and_keeps_each_members_buffers():
    pack = _pack(batchnorm_model)
    try:
        for _ in range(3):
            results = pack.train()
        assert all("error" not in r and np.isfinite(r["policy_loss"]) for r in results)
        means = [ppo_state(pack, m, 0)["policy"]["trunk.1.running_mean"] for m in range(pack.P)]
        assert not torch.equal(means[0], means[1])  # each member's statistics are of its own data
        # a member's checkpoint is its module's state_dict: a module of the factory loads it whole
        module = batchnorm_model(OBS, ACTIONS, {})
        module.load_state_dict(ppo_state(pack, 1, 1)["policy"])
        torch.testing.assert_close(module.trunk[1].running_mean, means[1])
        # a member that joins anew starts from its seed, buffers included
        pack.join(1, {**MEMBERS[1], "seed": 7})
        fresh = build_member(batchnorm_model, {}, OBS, ACTIONS, 7).state_dict()
        for name, value in ppo_state(pack, 1, 7)["policy"].items():
            torch.testing.assert_close(value, fresh[name])
    finally:
        pack.stop()


def test_a_subset_of_members_learns_alone_and_the_others_stay_as_they_were():
    pack = _pack(batchnorm_model)
    try:
        before = ppo_state(pack, 0, 0)["policy"]
        results = pack.train(learning=[1, 2])
        assert len(results) == 2
        for name, value in ppo_state(pack, 0, 0)["policy"].items():
            torch.testing.assert_close(value, before[name])
        assert not torch.equal(ppo_state(pack, 1, 1)["policy"]["heads.weight"],
                               build_member(batchnorm_model, {}, OBS, ACTIONS, 1).state_dict()["heads.weight"])
    finally:
        pack.stop()


def test_stack_check_says_which_modules_stack_and_why_the_others_do_not():
    assert stack_check(norm_model, {"width": 8}, OBS, ACTIONS, "norm") is None
    assert stack_check(batchnorm_model, {}, OBS, ACTIONS, "batchnorm") is None
    why = stack_check(branching_model, {}, OBS, ACTIONS, "branching")
    assert why is not None and why.startswith("its module does not stack under torch.func.vmap (RuntimeError: ")
    why = stack_check(wrong_width_model, {}, OBS, ACTIONS, "wrong")
    assert why == "its forward gives dist_inputs of shape (4, 3) for a batch of 4, not (4, 2) (logits of Discrete(2))"
