"""Every trainer tunes: an ASHA sweep cuts trials by their returns and lets the best run its
budget; a synchronous PBT sweep exploits, and each exploited trial learns with its own (perturbed)
config after the restore. One contract, one row per trainer (each with its small task)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from schedulers import ASHAScheduler, PopulationBasedTraining
from tuner import tune

OFF_POLICY = {"hidden_sizes": [32], "min_sample_timesteps_per_iteration": 64, "train_freq": 16, "gradient_steps": 4,
              "learning_starts": 32, "train_batch_size": 32, "replay_buffer_config": {"capacity": 1000},
              "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5}
#: Pendulum's iterations of one episode (200 env steps): every trial has a score at every PBT point.
ONE_EPISODE = {"metrics_num_episodes_for_smoothing": 1, "min_sample_timesteps_per_iteration": 200}


@dataclasses.dataclass(frozen=True)
class Row:
    config: dict[str, Any]
    asha_grid: tuple[str, list[Any]]  # the key ASHA's four trials differ in
    budget: int = 512  # env steps a trial may run (ASHA's first rung: a quarter of it)
    pbt_config: dict[str, Any] = dataclasses.field(default_factory=dict)  # PBT's sweep: these on top
    pbt_grid: tuple[Any, ...] = (1e-4, 3e-3)  # the two trials' lr
    pbt_mutations: dict[str, Any] = dataclasses.field(default_factory=lambda: {"lr": [1e-4, 3e-4, 1e-3, 3e-3]})
    pbt_interval: int = 2
    pbt_iterations: int = 4
    pbt_trainable: str = ""  # another name for the PBT sweep (DDPG for TD3's row)
    lr_key: str = "lr"  # the key PBT perturbs, reported back as cur_lr (ES: stepsize)


ROWS = {
    # the trials differ by seed: in 512 steps of epsilon-greedy exploration the lr changes no return
    "DQN": Row({"env": "CartPole-v1", **OFF_POLICY, "target_network_update_freq": 64}, ("seed", [0, 1, 2, 3])),
    # APEX's ladder needs actors: here the one-trial-at-a-time contract, its prioritized replay in the learner
    "APEX": Row({"env": "CartPole-v1", **OFF_POLICY, "target_network_update_freq": 64, "num_workers": 0,
                 "per_worker_exploration": False, "sample_async": False}, ("seed", [0, 1, 2, 3])),
    "SAC": Row({"env": "Pendulum-v1", **OFF_POLICY}, ("lr", [1e-4, 1e-3, 3e-3, 1e-2]), pbt_config=ONE_EPISODE),
    "TD3": Row({"env": "Pendulum-v1", **OFF_POLICY}, ("lr", [1e-4, 1e-3, 3e-3, 1e-2]),
               pbt_config={**ONE_EPISODE, "exploration_config": {"stddev": 0.1}}, pbt_trainable="DDPG",
               pbt_mutations={"lr": [1e-4, 3e-4, 1e-3, 3e-3],
                              "exploration_config": [{"stddev": 0.05}, {"stddev": 0.1}, {"stddev": 0.2}]}),
    "A2C": Row({"env": "CartPole-v1", "num_envs_per_worker": 4, "train_batch_size": 32, "hidden_sizes": [16],
                "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5}, ("lr", [1e-4, 7e-4, 3e-3, 1e-2]),
               budget=2048, pbt_interval=4, pbt_iterations=8, pbt_mutations={"lr": [1e-4, 7e-4, 3e-3]}),
    **{name: Row({"env": "CartPole-v1", "num_workers": 0, "num_envs_per_worker": 4, "train_batch_size": 32,
                  "min_sample_timesteps_per_iteration": 128, "hidden_sizes": [16], "num_cpus_for_learner": 0.5},
                 ("lr", [1e-4, 1e-3, 3e-3, 1e-2]), budget=2048, pbt_interval=4, pbt_iterations=8,
                 pbt_mutations={"lr": [1e-4, 1e-3, 3e-3]}) for name in ("IMPALA", "APPO")},
    **{name: Row({"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 128, "noise_size": 100_000,
                  "hidden_sizes": [8], "num_cpus_for_learner": 0.5, **population},
                 ("seed", [0, 1, 2, 3]), budget=1024, pbt_grid=(0.001, 0.05), lr_key=key,
                 pbt_mutations={key: [0.001, 0.01, 0.05]})
       for name, key, population in (("ES", "stepsize", {"episodes_per_batch": 8}),
                                     ("ARS", "sgd_stepsize", {"num_rollouts": 4, "rollouts_used": 2}))},
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_asha_cuts_trials_and_the_best_runs_its_budget(name, ray_session, tmp_path):
    # One trial at a time, seeded, sampling in the learner's process: the rungs see the same
    # returns in the same order every run, so whether a trial is cut does not depend on timing
    # (asynchronous ASHA cuts none when each trial reaches a rung better than all before it).
    row = ROWS[name]
    key, values = row.asha_grid
    analysis = tune.run(name, config={**row.config, "seed": 0, key: tune.grid_search(values)},
                        scheduler=ASHAScheduler(time_attr="env_steps_total", max_t=row.budget,
                                                grace_period=row.budget // 4, reduction_factor=2),
                        metric="episode_return_mean", mode="max", stop={"env_steps_total": row.budget},
                        max_concurrent_trials=1, storage_path=str(tmp_path), name="asha", verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    steps = sorted(t.last_result["env_steps_total"] for t in analysis.trials)
    assert steps[0] < row.budget <= steps[-1]  # some trials were cut, the best ran to the end


@pytest.mark.parametrize("name", sorted(ROWS))
def test_synchronous_pbt_exploits_and_the_exploited_trial_keeps_its_perturbed_config(name, ray_session, tmp_path):
    # synchronous: the whole population meets at each perturbation point, so the bottom half
    # always exploits the top half, however unevenly the trials ran on a loaded machine
    row = ROWS[name]
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=row.pbt_interval,
                                        quantile_fraction=0.5, hyperparam_mutations=row.pbt_mutations, seed=0,
                                        synch=True)
    analysis = tune.run(row.pbt_trainable or name,
                        config={**row.config, **row.pbt_config, "seed": 0, row.lr_key: tune.grid_search(list(row.pbt_grid))},
                        scheduler=scheduler, stop={"training_iteration": row.pbt_iterations},
                        metric="episode_return_mean", mode="max", storage_path=str(tmp_path), name="pbt", verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 2
    assert analysis.exploits, "no trial exploited another"
    for trial in analysis.trials:  # the restored trial learns with its own (perturbed) lr
        assert trial.last_result["cur_lr"] == pytest.approx(trial.config[row.lr_key])
