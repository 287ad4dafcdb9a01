"""The README's PPO sweep: ASHA over PPO's learning rate and clip on CartPole-v1, each trial with
2 rollout actors. `python examples/ppo_sweep.py [MAX_ENV_STEPS [NUM_SAMPLES]]`."""
import sys

from schedulers import ASHAScheduler
from tuner import tune

max_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000  # env steps per trial, at most
samples = int(sys.argv[2]) if len(sys.argv) > 2 else 8
analysis = tune.run(
    "PPO",
    config={"env": "CartPole-v1", "num_workers": 2, "lr": tune.loguniform(1e-4, 3e-3),
            "clip_param": tune.choice([0.1, 0.2, 0.3])},
    num_samples=samples, metric="episode_return_mean", mode="max",
    scheduler=ASHAScheduler(time_attr="env_steps_total", max_t=max_steps, grace_period=max_steps // 8),
    checkpoint_at_end=True, storage_path="./results", name="ppo_cartpole",
)
print(analysis.best_config, analysis.best_result["episode_return_mean"])
