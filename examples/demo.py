"""The README's main job: an ASHA sweep of distributed PPO on CartPole-v1, stored in SQLite.

Eight PPO trials (each a Ray actor with its own rollout actors, in one placement group) sample
learning rate, entropy bonus and batch shape; ASHA stops the weak ones early on env_steps_total;
a trial stops once its 100-episode mean return reaches 475 (CartPole is solved). Every result
lands in ./results/<name>/tuner.db.
"""

from __future__ import annotations

import time

from schedulers import ASHAScheduler
from tuner import tune


def main() -> None:
    name = f"ppo_cartpole_{time.strftime('%Y%m%d_%H%M%S')}"
    analysis = tune.run(
        "PPO",
        config={
            "env": "CartPole-v1",
            "lr": tune.loguniform(1e-4, 3e-3),
            "gamma": tune.choice([0.98, 0.99, 0.995]),
            "entropy_coeff": tune.choice([0.0, 0.01]),
            "num_epochs": tune.choice([4, 10]),
        },
        num_samples=8,
        metric="episode_return_mean",
        mode="max",
        scheduler=ASHAScheduler(time_attr="env_steps_total", grace_period=20_000, reduction_factor=3, max_t=100_000),
        stop={"episode_return_mean": 475, "env_steps_total": 100_000},
        storage_path="./results",
        name=name,
        seed=0,
    )
    best = analysis.best_result
    print(f"\nbest config: {analysis.best_config}")
    print(f"best episode_return_mean: {best['episode_return_mean']:.1f} after {best['env_steps_total']} env steps")
    print(f"results stored in {analysis.experiment_path}/tuner.db ({len(analysis.results_df)} rows); "
          f"reload with tune.load({analysis.experiment_path!r})")


if __name__ == "__main__":
    main()
