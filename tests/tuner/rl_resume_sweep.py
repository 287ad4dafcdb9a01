"""A PBT sweep of TD3 trainers that a test kills and resumes: importable by the driver subprocess."""

from __future__ import annotations

import sys

from schedulers import PopulationBasedTraining
from tuner import tune

ITERATIONS = 8
#: One Pendulum episode an iteration (every trial has a score at every point), networks small.
TD3_CONFIG = {"env": "Pendulum-v1", "hidden_sizes": [32], "min_sample_timesteps_per_iteration": 200,
              "train_freq": 16, "gradient_steps": 4, "learning_starts": 32, "train_batch_size": 32,
              "replay_buffer_config": {"capacity": 2000}, "metrics_num_episodes_for_smoothing": 1,
              "num_cpus_for_learner": 0.5, "seed": 0}


def sweep(storage: str, name: str, resume: bool = False):
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.34, seed=0, synch=True,
        hyperparam_mutations={"lr": [1e-4, 3e-4, 1e-3, 3e-3]})  # synchronous: the worst of three exploits at 2
    return tune.run(
        "TD3", config={**TD3_CONFIG, "lr": tune.grid_search([1e-4, 1e-3, 3e-3])}, scheduler=scheduler,
        stop={"training_iteration": ITERATIONS}, metric="episode_return_mean", mode="max", checkpoint_freq=1,
        max_failures=2,  # an actor lost while Ray cleans up after the killed driver is retried
        storage_path=storage, name=name, verbose=0, resume=resume,
    )


if __name__ == "__main__":
    sweep(sys.argv[1], sys.argv[2])
