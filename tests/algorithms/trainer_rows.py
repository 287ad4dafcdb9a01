"""Every trainer's row of the tuning contract (tests/algorithms/test_trainers_tune.py), and its PBT
sweep, importable by the driver process that test kills: ``python -m tests.algorithms.trainer_rows
STORAGE TRAINER`` runs the sweep and holds it after its first exploit, until it is killed."""

from __future__ import annotations

import dataclasses
import sys
import threading
from typing import Any

from schedulers import PopulationBasedTraining
from tuner import tune
from tuner.callback import Callback

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


class HoldAfterExploit(Callback):
    """Holds the driver at the first result past the first perturbation point: synchronous PBT has
    recorded its exploit by then and the sweep is not over, so the kill always lands mid-sweep."""

    def __init__(self, interval: int) -> None:
        self.interval = interval

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        if result["training_iteration"] > self.interval:
            threading.Event().wait()  # until the test kills this process


def pbt_sweep(name: str, storage: str, resume: bool = False, callbacks: list[Callback] | None = None) -> Any:
    """The row's synchronous PBT sweep of two trials, checkpointed every iteration: the bottom
    half always exploits the top half at each perturbation point, however unevenly the trials ran."""
    row = ROWS[name]
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=row.pbt_interval,
                                        quantile_fraction=0.5, hyperparam_mutations=row.pbt_mutations, seed=0,
                                        synch=True)
    return tune.run(row.pbt_trainable or name,
                    config={**row.config, **row.pbt_config, "seed": 0, row.lr_key: tune.grid_search(list(row.pbt_grid))},
                    scheduler=scheduler, stop={"training_iteration": row.pbt_iterations}, checkpoint_freq=1,
                    max_failures=2,  # an actor lost while Ray cleans up after the killed driver is retried
                    metric="episode_return_mean", mode="max", storage_path=storage, name="pbt", verbose=0,
                    resume=resume, callbacks=callbacks)


if __name__ == "__main__":
    storage, trainer = sys.argv[1:3]
    pbt_sweep(trainer, storage, callbacks=[HoldAfterExploit(ROWS[trainer].pbt_interval)])
