"""PopulationSAC (algorithms/sac/population.py): a pack's SAC members each learn as they would alone.
One update of the stacked members equals each member's own SAC update (the trainer's: temperature,
then critics, then actor through the updated critics, then the target critics), with the same
noise, on the CPU and (where one is lent) on a CUDA device; bad packs are one error naming
pack_trials; a subset learns and the others stay put."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from algorithms.sac.population import PopulationSAC, build_networks
from algorithms.sac.trainer import squashed_sample

MEMBERS = [{"lr": 1e-3, "gamma": 0.99, "tau": 0.005, "initial_alpha": 1.0, "target_entropy": "auto",
            "max_grad_norm": None, "seed": 0},
           {"lr": 3e-3, "gamma": 0.9, "tau": 0.5, "initial_alpha": 0.2, "target_entropy": -0.5,
            "max_grad_norm": 0.01, "seed": 1}]
SMALL = {"env": "Pendulum-v1", "num_envs_per_worker": 2, "train_batch_size": 8, "train_freq": 2,
         "min_sample_timesteps_per_iteration": 16, "num_steps_sampled_before_learning_starts": 8,
         "hidden_sizes": [8], "replay_buffer_config": {"capacity": 100}}


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
#: A test of a pack on each device: its members' num_gpus_for_learner (a pack on a GPU holds its
#: networks, optimisers and updates there).
ON_EACH_DEVICE = pytest.mark.parametrize("pack", [0, pytest.param(1, marks=cuda)], indirect=True, ids=["cpu", "cuda"])


@pytest.fixture
def pack(request):
    pack = PopulationSAC([{**SMALL, **m, "num_gpus_for_learner": getattr(request, "param", 0)} for m in MEMBERS])
    yield pack
    pack.stop()


@pytest.mark.parametrize("configs, message", [
    ([], "a pack needs at least one member"),
    ([{"env": "Pendulum-v1", "use_sde": True}], "got ['use_sde']"),
    ([{"env": "Pendulum-v1", "twin_q": True}, {"env": "Pendulum-v1", "twin_q": False}], "members of a pack share 'twin_q'"),
])
def test_a_bad_pack_is_one_error_naming_pack_trials(configs, message):
    with pytest.raises(ValueError, match="^pack_trials: ") as info:
        PopulationSAC.check_pack(configs)
    assert message in str(info.value)


def test_an_env_without_bounded_box_actions_is_refused():
    with pytest.raises(ValueError, match="pack_trials: packed SAC takes a Box observation and bounded Box actions"):
        PopulationSAC([{"env": "CartPole-v1"}])


def _adam_step(params, loss, lr, max_grad_norm):
    optimizer = torch.optim.Adam(params, lr=lr, eps=1e-5)
    loss.backward()
    if max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()


@ON_EACH_DEVICE
def test_one_update_is_each_members_own_sac_step(pack):
    for _ in range(8):
        pack._sample_round(2)
    P, B = pack.P, 8
    nets = [build_networks({**pack.members[m], "seed": MEMBERS[m]["seed"]}, pack.obs_space, pack.act_space)
            for m in range(P)]
    draws = [pack.buffers[m].sample(B, copy.deepcopy(pack.replay_rngs[m])) for m in range(P)]
    noise_rng = torch.Generator(pack.device)
    noise_rng.set_state(pack.noise.get_state())
    act_dim = pack.act_dim
    noise, next_noise = (torch.randn((P, B, act_dim), generator=noise_rng, device=pack.device).cpu()
                         for _ in range(2))
    stats = pack.update(list(range(P)))
    for m, member in enumerate(MEMBERS):
        actor, critic = nets[m]
        target = copy.deepcopy(critic)
        log_alpha = torch.tensor(math.log(member["initial_alpha"]), requires_grad=True)
        batch = {k: torch.from_numpy(v) for k, v in draws[m].items()}
        target_entropy = -act_dim if member["target_entropy"] == "auto" else member["target_entropy"]
        pi_actions, logp = squashed_sample(*actor(batch["obs"]), noise[m])
        alpha = log_alpha.detach().exp()
        alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
        _adam_step([log_alpha], alpha_loss, member["lr"], None)
        with torch.no_grad():
            next_actions, next_logp = squashed_sample(*actor(batch["next_obs"]), next_noise[m])
            next_q = torch.stack(target(batch["next_obs"], next_actions)).min(0).values
            y = batch["rewards"] + batch["discounts"] * (next_q - alpha * next_logp)
        qs = critic(batch["obs"], batch["actions"])
        critic_loss = 0.5 * sum(torch.nn.functional.mse_loss(q, y) for q in qs)
        _adam_step(list(critic.parameters()), critic_loss, member["lr"], member["max_grad_norm"])
        critic.requires_grad_(False)
        actor_loss = (alpha * logp - torch.stack(critic(batch["obs"], pi_actions)).min(0).values).mean()
        _adam_step(list(actor.parameters()), actor_loss, member["lr"], member["max_grad_norm"])
        critic.requires_grad_(True)
        with torch.no_grad():
            for t, p in zip(target.parameters(), critic.parameters()):
                t.lerp_(p, member["tau"])
        for key, value in (("alpha_loss", alpha_loss), ("critic_loss", critic_loss), ("actor_loss", actor_loss)):
            assert stats[key][m] == pytest.approx(value.item(), rel=1e-4, abs=1e-5), key
        assert float(pack.log_alpha[m, 0]) == pytest.approx(log_alpha.item(), rel=1e-5)
        for module, stack, flat in ((actor, pack.actor, None), (critic, pack.critic, None), (target, pack.critic, pack.target)):
            for name, value in module.state_dict().items():
                torch.testing.assert_close(stack.state_dict(m, flat)[name], value, rtol=1e-4, atol=1e-6)


def test_a_subset_of_members_learns_and_the_others_stay_as_they_were(pack):
    pack.train()
    before = (pack.actor.flat[0].copy(), pack.critic.flat[0].copy(), pack.target[0].clone(), float(pack.log_alpha[0, 0]))
    results = pack.train(learning=[1])
    assert len(results) == 1 and results[0]["members_learning"] == 1 and results[0]["num_sgd_updates"] > 0
    for now, then in zip((pack.actor.flat[0], pack.critic.flat[0], pack.target[0]), before[:3]):
        np.testing.assert_array_equal(now, then)
    assert float(pack.log_alpha[0, 0]) == before[3]


@ON_EACH_DEVICE
def test_a_member_whose_parameters_stop_being_finite_fails_alone(pack):
    pack.train()
    pack.critic.theta[0, :3] = math.nan
    results = pack.train()
    assert "not finite" in results[0]["error"] and "member 0" in results[0]["error"]
    assert "error" not in results[1]


def test_the_populations_defaults_are_sacs():
    from algorithms.sac.population import PER_MEMBER, SIGNATURE
    from algorithms.sac.trainer import SAC_DEFAULTS

    for key, value in {**SIGNATURE, **PER_MEMBER}.items():
        if key in SAC_DEFAULTS and key not in ("model", "model_config"):
            assert value == SAC_DEFAULTS[key], key
