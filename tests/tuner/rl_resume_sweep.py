"""A PBT sweep of RL trainers that a test kills and resumes: importable by the driver subprocess.

TD3 (a replay buffer, target networks), APPO (a streaming rollout actor per trial, a target
policy) and ES (actors playing a population's episodes, a noise table, Adam): the state each
keeps in its checkpoints differs, the contract does not."""

from __future__ import annotations

import sys

from schedulers import PopulationBasedTraining
from tuner import tune

ITERATIONS = 6
CONFIGS = {
    #: One Pendulum episode an iteration (every trial has a score at every point), networks small.
    "TD3": {"env": "Pendulum-v1", "hidden_sizes": [32], "min_sample_timesteps_per_iteration": 200,
            "train_freq": 16, "gradient_steps": 4, "learning_starts": 32, "train_batch_size": 32,
            "replay_buffer_config": {"capacity": 2000}, "metrics_num_episodes_for_smoothing": 1,
            "num_cpus_for_learner": 0.5, "seed": 0},
    #: One rollout actor streaming to each trial's learner, small batches.
    "APPO": {"env": "CartPole-v1", "hidden_sizes": [16], "num_workers": 1, "num_envs_per_worker": 4,
             "train_batch_size": 64, "min_sample_timesteps_per_iteration": 256, "num_cpus_per_worker": 0.25,
             "num_cpus_for_learner": 0.25, "metrics_num_episodes_for_smoothing": 5, "seed": 0},
    #: Two actors playing a small population's episodes.
    "ES": {"env": "CartPole-v1", "hidden_sizes": [8], "num_workers": 2, "episodes_per_batch": 8,
           "train_batch_size": 100, "noise_size": 100_000, "num_cpus_per_worker": 0.125, "num_cpus_for_learner": 0.25,
           "metrics_num_episodes_for_smoothing": 8, "seed": 0},
}
#: The key PBT perturbs (the learning rate), as each trainer names it.
LR_KEYS = {"ES": "stepsize"}
LRS = [1e-4, 3e-4, 1e-3, 3e-3]


def sweep(storage: str, name: str, resume: bool = False, trainer: str = "TD3"):
    key = LR_KEYS.get(trainer, "lr")
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2, quantile_fraction=0.34, seed=0, synch=True,
        hyperparam_mutations={key: LRS})  # synchronous: the worst of three exploits at 2
    return tune.run(
        trainer, config={**CONFIGS[trainer], key: tune.grid_search([LRS[0], LRS[2], LRS[3]])}, scheduler=scheduler,
        stop={"training_iteration": ITERATIONS}, metric="episode_return_mean", mode="max", checkpoint_freq=1,
        max_failures=2,  # an actor lost while Ray cleans up after the killed driver is retried
        storage_path=storage, name=name, verbose=0, resume=resume,
    )


if __name__ == "__main__":
    sweep(sys.argv[1], sys.argv[2], trainer=sys.argv[3])
