"""PopulationDQN (algorithms/dqn/population.py): a pack's DQN members each learn as they would alone.
One update of the stacked members equals each member's own DQN update (its own minibatch, double Q
or not, Huber loss, its own torch.optim.Adam after its own gradient clip); each member's target
network follows its own cadence and tau; bad packs are one error naming pack_trials; a pack learns.
The update and the NaN member run on the CPU and, where one is lent, on a CUDA device."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from algorithms.dqn.population import PopulationDQN, build_q
from tests.algorithms.sampling.test_population_envs import StepCounting

MEMBERS = [{"lr": 1e-3, "gamma": 0.99, "double_q": True, "max_grad_norm": 40.0, "tau": 1.0,
            "target_network_update_freq": 8, "seed": 0},
           {"lr": 3e-3, "gamma": 0.9, "double_q": False, "max_grad_norm": 0.01, "tau": 0.5,
            "target_network_update_freq": 16, "seed": 1},
           {"lr": 1e-4, "gamma": 0.5, "double_q": True, "max_grad_norm": None, "tau": 1.0,
            "target_network_update_freq": 1000, "seed": 2}]
SMALL = {"env": "CartPole-v1", "num_envs_per_worker": 2, "train_batch_size": 8, "train_freq": 4,
         "min_sample_timesteps_per_iteration": 16, "num_steps_sampled_before_learning_starts": 8,
         "hidden_sizes": [8], "n_step": 2, "replay_buffer_config": {"capacity": 100}}


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
#: A test of a pack on each device: its members' num_gpus_for_learner (a pack on a GPU holds its
#: networks, optimisers and updates there).
ON_EACH_DEVICE = pytest.mark.parametrize("pack", [0, pytest.param(1, marks=cuda)], indirect=True, ids=["cpu", "cuda"])


@pytest.fixture
def pack(request):
    pack = PopulationDQN([{**SMALL, **m, "num_gpus_for_learner": getattr(request, "param", 0)} for m in MEMBERS])
    yield pack
    pack.stop()


@pytest.mark.parametrize("configs, message", [
    ([], "a pack needs at least one member"),
    ([{"env": "CartPole-v1", "prioritized_replay": True}], "got ['prioritized_replay']"),
    ([{"env": "CartPole-v1", "train_freq": 4}, {"env": "CartPole-v1", "train_freq": 8}],
     "members of a pack share 'train_freq'"),
    ([{"lr": 1e-3}], "config key 'env' is required"),
])
def test_a_bad_pack_is_one_error_naming_pack_trials(configs, message):
    with pytest.raises(ValueError, match="^pack_trials: ") as info:
        PopulationDQN.check_pack(configs)
    assert message in str(info.value)


@ON_EACH_DEVICE
def test_one_update_is_each_members_own_dqn_step(pack):
    for _ in range(4):  # some transitions in every member's buffer
        pack._sample_round(4)
    alone = [build_q({**pack.members[m], "seed": MEMBERS[m]["seed"]}, pack.obs_space, pack.act_space)
             for m in range(pack.P)]
    for m, network in enumerate(alone):  # each member starts as its network built alone from its seed
        for name, value in network.state_dict().items():
            torch.testing.assert_close(pack.q.state_dict(m)[name], value)
    draws = [pack.buffers[m].sample(8, copy.deepcopy(pack.replay_rngs[m])) for m in range(pack.P)]
    stats = pack.update(list(range(pack.P)))
    for m, member in enumerate(MEMBERS):
        network, target = alone[m], copy.deepcopy(alone[m])
        batch = {k: torch.from_numpy(v) for k, v in draws[m].items()}
        with torch.no_grad():
            next_q = target(batch["next_obs"])
            if member["double_q"]:
                next_value = next_q.gather(-1, network(batch["next_obs"]).argmax(-1, keepdim=True))[:, 0]
            else:
                next_value = next_q.max(-1).values
            y = batch["rewards"] + batch["discounts"] * next_value
        q = network(batch["obs"]).gather(-1, batch["actions"][:, None])[:, 0]
        loss = torch.nn.functional.smooth_l1_loss(q, y)
        optimizer = torch.optim.Adam(network.parameters(), lr=member["lr"], eps=1e-5)
        loss.backward()
        if member["max_grad_norm"] is not None:
            torch.nn.utils.clip_grad_norm_(network.parameters(), member["max_grad_norm"])
        optimizer.step()
        assert stats["td_loss"][m] == pytest.approx(loss.item(), rel=1e-4, abs=1e-6)
        for name, value in network.state_dict().items():
            torch.testing.assert_close(pack.q.state_dict(m)[name], value, rtol=1e-4, atol=1e-6)


def test_each_members_target_follows_its_own_cadence_and_tau(pack):
    before = pack.target.clone()
    pack.train()  # 16+ env steps each: member 0 (every 8) and 1 (every 16, tau 0.5) update, 2 (every 1000) not
    assert not np.array_equal(pack.target[0], before[0])
    np.testing.assert_array_equal(pack.target[0], pack.q.flat[0])  # tau 1: a copy at its last update
    assert not np.array_equal(pack.target[1], before[1]) and not np.array_equal(pack.target[1], pack.q.flat[1])
    np.testing.assert_array_equal(pack.target[2], before[2])


def test_a_subset_of_members_learns_and_the_others_stay_as_they_were(pack):
    pack.train()
    before = {"q": pack.q.flat[0].copy(), "steps": int(pack.env_steps[0]), "replay": len(pack.buffers[0]),
              "updates": int(pack.num_updates[0])}
    results = pack.train(learning=[1, 2])
    assert len(results) == 2 and all(r["members_learning"] == 2 for r in results)
    np.testing.assert_array_equal(pack.q.flat[0], before["q"])
    assert (int(pack.env_steps[0]), len(pack.buffers[0]), int(pack.num_updates[0])) == (
        before["steps"], before["replay"], before["updates"])


def test_a_member_that_does_not_learn_costs_no_env_step():
    StepCounting.STEPS.clear()
    pack = PopulationDQN([{**SMALL, **m, "env": StepCounting} for m in MEMBERS])
    try:
        results = pack.train(learning=[1, 2])
        assert len(results) == 2 and StepCounting.STEPS[0] == 0 and len(pack.buffers[0]) == 0
        assert [StepCounting.STEPS[m] for m in (1, 2)] == [r["env_steps_total"] for r in results]
        assert all(r["env_steps_total"] > 0 for r in results)
    finally:
        pack.stop()


def test_a_pack_learns_cartpole_and_reports_each_member():
    config = {"env": "CartPole-v1", "num_envs_per_worker": 4, "hidden_sizes": [64, 64],
              "num_steps_sampled_before_learning_starts": 500,
              "epsilon": [[0, 1.0], [5000, 0.05]], "train_batch_size": 64, "target_network_update_freq": 250}
    pack = PopulationDQN([{**config, "lr": 1e-3, "seed": 0}, {**config, "lr": 1e-3, "seed": 1}])
    try:
        for _ in range(12):
            results = pack.train()
        for r in results:
            assert r["env_steps_total"] >= 12_000 and r["num_updates"] > 2_500 and r["epsilon"] == pytest.approx(0.05)
            assert "error" not in r
        assert max(r["episode_return_mean"] for r in results) > 60  # random play: ~22
    finally:
        pack.stop()


@ON_EACH_DEVICE
def test_a_member_whose_parameters_stop_being_finite_fails_alone(pack):
    pack.train()
    pack.q.theta[1, :3] = float("nan")
    results = pack.train()
    assert "not finite" in results[1]["error"] and "member 1" in results[1]["error"]
    assert "error" not in results[0] and "error" not in results[2]


def test_the_populations_defaults_are_dqns():
    from algorithms.dqn.population import PER_MEMBER, SIGNATURE
    from algorithms.dqn.trainer import DQN_DEFAULTS

    for key, value in {**SIGNATURE, **PER_MEMBER}.items():
        if key in DQN_DEFAULTS and key not in ("model", "model_config"):
            assert value == DQN_DEFAULTS[key], key
