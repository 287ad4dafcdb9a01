"""Packed DQN trials (``pack_trials``) end to end: each member is a trial of its own for the store,
the schedulers and the searchers. ASHA stops members and their pack goes on; PBT exploits inside a
pack (on PostgreSQL); a killed pack restarts every member from its own checkpoint; a member's
checkpoint is a DQN agent's, which an unpacked DQN trial continues; a config that cannot pack
runs unpacked and the sweep says why once; a user's Q module that stacks packs."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from algorithms import DQN, load_agent
from schedulers import ASHAScheduler, PopulationBasedTraining
from tests.algorithms.packed_trials import KillPackOnce, iterations_once_each
from tuner import tune

#: A member's small task: 32 env steps an iteration, learning after 16, a 16-unit Q network.
SMALL = {"env": "CartPole-v1", "num_envs_per_worker": 2, "train_batch_size": 16, "train_freq": 4,
         "min_sample_timesteps_per_iteration": 32, "num_steps_sampled_before_learning_starts": 16,
         "hidden_sizes": [16], "target_network_update_freq": 32, "replay_buffer_config": {"capacity": 1000}}
# Best first: members of a pack report a rung about together, in the order they were made, and
# ASHA cuts a trial only if it is worse than the rung's results so far (ascending, none would be).
LRS = [3e-3, 1e-3, 3e-4, 1e-4]


def q_model(observation_space, action_space, model_config):
    """A user's Q module with LayerNorm: stacks."""
    from torch import nn

    return nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.LayerNorm(16), nn.ReLU(),
                         nn.Linear(16, action_space.n))


def test_asha_stops_dqn_members_and_their_checkpoints_are_dqn_agents(ray_session, tmp_path, capsys):
    analysis = tune.run("DQN", config={**SMALL, "seed": 0, "lr": tune.grid_search(LRS)},
                        scheduler=ASHAScheduler(time_attr="training_iteration", max_t=6, grace_period=2,
                                                reduction_factor=2),
                        metric="cur_lr", mode="max", stop={"training_iteration": 6}, checkpoint_at_end=True,
                        storage_path=str(tmp_path), name="asha", verbose=1, pack_trials=4)
    said = capsys.readouterr().out
    assert said.count("pack_trials=4: trials of DQN run packed, up to 4 to a process (DQN on 'CartPole-v1', 2 envs, "
                      "a replay buffer and [16] Q network a member, stacked with torch.func a pack)") == 1, said
    iterations_once_each(analysis)
    last = {t.config["lr"]: t.last_result for t in analysis.trials}
    assert all(r["learner"] == "packed" and r["num_updates"] > 0 for r in last.values())
    assert last[max(LRS)]["training_iteration"] == 6 and min(r["training_iteration"] for r in last.values()) < 6
    assert last[max(LRS)]["pack_size"] < len(LRS)  # the pack went on without the members ASHA stopped
    best = analysis.get_best_checkpoint(analysis.get_best_trial())
    agent = load_agent(best.path)
    assert isinstance(agent, DQN) and agent.env_steps_total == last[max(LRS)]["env_steps_total"]
    assert agent.act(np.zeros(4, dtype=np.float32)) in (0, 1)
    # an unpacked DQN trial continues the member: its networks and optimiser as the pack left them
    before = {k: v.clone() for k, v in agent.policy.state_dict().items()}
    result = agent.train()
    assert result["env_steps_total"] > last[max(LRS)]["env_steps_total"] and result["num_updates"] > last[max(LRS)]["num_updates"]
    assert any(not torch.equal(before[k], v) for k, v in agent.policy.state_dict().items())


def test_a_packed_dqn_pbt_sweep_exploits_inside_the_pack(ray_session, tmp_path, postgres_url):
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
                                        seed=0, synch=True, hyperparam_mutations={"lr": LRS})
    analysis = tune.run("DQN", config={**SMALL, "seed": 0, "lr": tune.grid_search(LRS)}, scheduler=scheduler,
                        stop={"training_iteration": 6}, checkpoint_freq=1, metric="episode_return_mean", mode="max",
                        storage_path=str(tmp_path), database_url=postgres_url, name="dqn_pbt", verbose=0, pack_trials=4)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    iterations_once_each(analysis)
    assert analysis.exploits, "no member exploited another"
    assert len({t.last_result["pack_id"] for t in analysis.trials}) == 1
    for trial in analysis.trials:  # each learns on with its own (perturbed) lr, in its pack
        assert trial.last_result["cur_lr"] == pytest.approx(trial.config["lr"])
        assert trial.last_result["learner"] == "packed"


def test_a_killed_dqn_pack_restarts_every_member_from_its_own_checkpoint(ray_session, tmp_path):
    killer = KillPackOnce()
    analysis = tune.run("DQN", config={**SMALL, "seed": tune.grid_search([0, 1, 2])}, stop={"training_iteration": 4},
                        checkpoint_freq=1, max_failures=1, storage_path=str(tmp_path), name="killed", verbose=0,
                        pack_trials=3, callbacks=[killer])
    assert killer.killed is not None
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    iterations_once_each(analysis)
    assert all(t.num_failures == 1 and t.last_result["pack_id"] != killer.killed for t in analysis.trials)
    for frame in analysis.trial_dataframes.values():  # each went on from its own counts
        assert list(frame["env_steps_total"]) == sorted(frame["env_steps_total"])


def test_a_dqn_config_that_cannot_pack_runs_unpacked_and_a_q_module_that_stacks_packs(ray_session, tmp_path, capsys):
    analysis = tune.run("DQN", config={**SMALL, "prioritized_replay": True, "seed": tune.grid_search([0, 1, 2])},
                        stop={"training_iteration": 1}, storage_path=str(tmp_path), name="prioritized", verbose=1)
    said = capsys.readouterr().out
    assert said.count("pack_trials='auto': trials of DQN run one per process: config key 'prioritized_replay' is "
                      "True: a packed member runs with its default False") == 1, said
    assert all(t.last_result.get("learner") != "packed" for t in analysis.trials)
    own = {k: v for k, v in SMALL.items() if k != "hidden_sizes"}
    analysis = tune.run("DQN", config={**own, "model": q_model, "seed": tune.grid_search([0, 1])},
                        stop={"training_iteration": 2}, storage_path=str(tmp_path), name="own", verbose=1,
                        pack_trials=2)
    said = capsys.readouterr().out
    assert "q_model's Q network a member, stacked with torch.func" in said, said
    assert [t.last_result["learner"] for t in analysis.trials] == ["packed", "packed"]


def branching_q_model(observation_space, action_space, model_config):
    """A Q module with a Python branch on its input's values: does not stack."""
    from torch import nn

    class BranchingQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(observation_space.shape[0], action_space.n)

        def forward(self, obs):
            return self.q(obs / 100 if obs.abs().max() > 100 else obs)

    return BranchingQ()


def test_a_q_module_that_does_not_stack_has_no_signature_and_says_why():
    signature, why = DQN.pack_signature({**{k: v for k, v in SMALL.items() if k != "hidden_sizes"}, "model": branching_q_model})
    assert signature is None
    assert why.startswith("config key 'model' is branching_q_model: its module does not stack under torch.func.vmap "
                          "(RuntimeError: "), why
    signature, how = DQN.pack_signature({**{k: v for k, v in SMALL.items() if k != "hidden_sizes"}, "model": q_model})
    assert signature is not None and "q_model's Q network a member" in how


def test_members_that_ask_a_gpu_share_a_pack_on_it_and_others_pack_apart():
    on_cpu, how_cpu = DQN.pack_signature(dict(SMALL))
    on_gpu, how_gpu = DQN.pack_signature({**SMALL, "num_gpus_for_learner": 1})
    assert on_gpu is not None and on_gpu != on_cpu  # one device to a pack
    assert how_gpu.endswith("stacked with torch.func a pack on its GPU") and not how_cpu.endswith("GPU")
