"""Many small agents in few processes: PBT over 16 DQN trials on CartPole-v1, packed 8 to a process
(``pack_trials``: each pack one population learner, each member still a trial with its own
results, checkpoints and exploits). `python examples/packed_pbt.py [ITERATIONS [NUM_SAMPLES]]`."""
import sys

import algorithms
from schedulers import PopulationBasedTraining
from tuner import tune

iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 30  # of 1,000 env steps each
samples = int(sys.argv[2]) if len(sys.argv) > 2 else 16
# synch: the population perturbs together, as a pack steps its members together
pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=max(2, iterations // 6), synch=True,
                              hyperparam_mutations={"lr": tune.loguniform(1e-4, 3e-3),
                                                    "target_network_update_freq": [250, 500, 1000]})
analysis = tune.run(
    "DQN",
    config={"env": "CartPole-v1", "hidden_sizes": [64, 64], "lr": tune.loguniform(1e-4, 3e-3),
            "target_network_update_freq": tune.choice([250, 500, 1000])},
    num_samples=samples, metric="episode_return_mean", mode="max", scheduler=pbt,
    stop={"training_iteration": iterations}, checkpoint_freq=max(2, iterations // 6), checkpoint_at_end=True,
    pack_trials=max(1, samples // 2), storage_path="./results", name="dqn_packed_pbt",
)
best = analysis.get_best_trial()
agent = algorithms.load_agent(analysis.get_best_checkpoint(best).path)
print(f"{len(analysis.exploits)} exploits; best {best.trial_id} ({best.last_result['learner']}, "
      f"pack of {best.last_result['pack_size']}): return {best.last_result['episode_return_mean']:.1f} with "
      f"{best.config}; its agent acts: {agent.act(agent.make_env().reset(seed=0)[0])}")
