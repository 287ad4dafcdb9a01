"""Packed SAC trials (``pack_trials``) end to end: members of one pack under PBT exploit inside it,
each iteration stored once; a member's checkpoint is a SAC agent's, which an unpacked SAC trial
continues; a config that cannot pack runs unpacked and the sweep says why once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import SAC, load_agent
from schedulers import PopulationBasedTraining
from tests.algorithms.packed_trials import iterations_once_each
from tests.algorithms.sac.test_population import SMALL
from tuner import tune

LRS = [1e-4, 3e-4, 1e-3, 3e-3]


def test_a_packed_sac_pbt_sweep_exploits_inside_the_pack_and_its_agents_load(ray_session, tmp_path, capsys):
    # Ranked by their own lr (no Pendulum episode ends in this budget): the engine's side of an
    # exploit is what is tested, not SAC's learning.
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.5,
                                        seed=0, synch=True, hyperparam_mutations={"lr": LRS})
    analysis = tune.run("SAC", config={**SMALL, "seed": 0, "lr": tune.grid_search(LRS)}, scheduler=scheduler,
                        stop={"training_iteration": 4}, checkpoint_freq=1, metric="cur_lr", mode="max",
                        storage_path=str(tmp_path), name="sac_pbt", verbose=1, pack_trials=4)
    said = capsys.readouterr().out
    assert said.count("pack_trials=4: trials of SAC run packed, up to 4 to a process (SAC on 'Pendulum-v1', 2 envs, a "
                      "replay buffer and [8] actor and critics a member, stacked with torch.func a pack)") == 1, said
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    iterations_once_each(analysis)
    assert analysis.exploits, "no member exploited another"
    for trial in analysis.trials:
        assert trial.last_result["learner"] == "packed" and trial.last_result["cur_lr"] == pytest.approx(trial.config["lr"])
    best = analysis.get_best_trial()
    agent = load_agent(analysis.get_best_checkpoint(best).path)
    assert isinstance(agent, SAC) and agent.env_steps_total == best.last_result["env_steps_total"]
    action = agent.act(np.zeros(3, dtype=np.float32))
    assert np.shape(action) == (1,) and -2.0 <= float(action[0]) <= 2.0
    before = {k: v.clone() for k, v in agent.policy.state_dict().items()}
    result = agent.train()  # an unpacked SAC trial continues the member
    assert result["num_updates"] > best.last_result["num_updates"]
    assert any(not torch.equal(before[k], v) for k, v in agent.policy.state_dict().items())


def test_a_sac_config_that_cannot_pack_runs_unpacked_and_the_sweep_says_why_once(ray_session, tmp_path, capsys):
    analysis = tune.run("SAC", config={**SMALL, "seed": tune.grid_search([0, 1, 2]), "num_workers": 1},
                        stop={"training_iteration": 1}, storage_path=str(tmp_path), name="sac_unpacked", verbose=1)
    said = capsys.readouterr().out
    assert said.count("pack_trials='auto': trials of SAC run one per process: config key 'num_workers' is 1: a packed "
                      "member samples in its pack's process (0)") == 1, said
    assert all(t.last_result.get("learner") != "packed" for t in analysis.trials)


def branching_actor(observation_space, action_space, model_config):
    """An actor module with a Python branch on its input's values: does not stack."""
    from torch import nn

    class BranchingActor(nn.Module):
        def __init__(self):
            super().__init__()
            self.out = nn.Linear(observation_space.shape[0], 2 * action_space.shape[0])

        def forward(self, obs):
            return self.out(obs / 100 if obs.abs().max() > 100 else obs)

    return BranchingActor()


def test_an_actor_module_that_does_not_stack_has_no_signature_and_says_why():
    signature, why = SAC.pack_signature({**{k: v for k, v in SMALL.items() if k != "hidden_sizes"}, "model": branching_actor})
    assert signature is None
    assert why.startswith("config key 'model' is branching_actor: its module does not stack under torch.func.vmap "
                          "(RuntimeError: "), why
