"""The README's main job: an ASHA sweep of distributed PPO trials on a slow simulator, in SQLite.

The env is ``tuner/SlowCartPole-v1`` (``algorithms/envs/builtin.py``): CartPole's dynamics behind a step
that sleeps 1 ms, and 20 ms one time in 50, the shape of a CPU simulator with hiccups. Sleeping
lets two cores host a cluster's worth of simulators; a real one needs a core per env.

Each trial is a Ray actor in its own placement group that starts its own rollout actors in it:
``num_workers="auto"`` times the env in the driver, sees a slow, uneven step, and gives each of the
trial's 8 envs an actor of its own, sampling asynchronously (each steps its env without pause
and streams the steps to the learner; a slow step delays only its own env). Rollout actors are
handed from trial to trial with the trial actor. Six trials sample learning rate, entropy bonus
and epochs; ASHA stops the weak ones early on env_steps_total (at 10k, then 30k env steps); a
trial also stops once its 100-episode mean return reaches 475. About a minute on 2 cores, where
one trial runs at a time: each asks Ray for 0.5 CPU for its learner and 0.1 for each of its 8
actors (a sleeping simulator needs little CPU; left out, the timing's measured CPU share decides). Every result lands in
./results/<name>/tuner.db, and TensorBoard's HParams dashboard in ./results/<name>/tensorboard.
"""

from __future__ import annotations

import time

from algorithms.envs.builtin import measure_mean_step
from schedulers import ASHAScheduler
from tuner import tune

ENV_CONFIG = {"fast_ms": 1.0, "slow_ms": 20.0, "slow_prob": 0.02}
ENVS_PER_TRIAL = 8


def main() -> None:
    name = f"ppo_slow_cartpole_{time.strftime('%Y%m%d_%H%M%S')}"
    analysis = tune.run(
        "PPO",
        config={
            "env": "tuner/SlowCartPole-v1",
            "env_config": ENV_CONFIG,
            "num_workers": "auto",  # rollout actors: one per env, asynchronous (see the trials' table)
            "num_envs_per_worker": ENVS_PER_TRIAL,
            "num_cpus_for_learner": 0.5,
            "num_cpus_per_worker": 0.1,
            "lr": tune.loguniform(1e-3, 3e-3),
            "entropy_coeff": tune.choice([0.0, 0.01]),
            "num_epochs": tune.choice([6, 10]),
        },
        num_samples=6,
        metric="episode_return_mean",
        mode="max",
        scheduler=ASHAScheduler(time_attr="env_steps_total", grace_period=10_000, reduction_factor=3, max_t=30_000),
        stop={"episode_return_mean": 475, "env_steps_total": 30_000},
        storage_path="./results",
        name=name,
        seed=0,
    )
    ideal = ENVS_PER_TRIAL / measure_mean_step(ENV_CONFIG)
    profiles = analysis.trial_profiles()  # hold_s: from the trial's placement to its end, start-up included
    print(f"\nwhere each trial sampled (ideal for {ENVS_PER_TRIAL} envs of this simulator: {ideal:,.0f} env steps/s):")
    for trial in analysis.trials:
        result = trial.last_result or {}
        steps = result.get("env_steps_total", 0)
        seconds = profiles.get(trial.trial_id, {}).get("hold_s") or result.get("time_total_s", 0.0)
        rate = steps / seconds if seconds else 0.0
        print(f"  {trial.trial_id}  {result.get('sampling_layout', '?')} on {result.get('rollout_nodes', '?')}: "
              f"{steps:,} env steps in {seconds:.1f} s = {rate:,.0f}/s ({rate / ideal:.0%} of ideal)")
    reason = next((t.last_result.get("sampling_layout_reason") for t in analysis.trials if t.last_result), None)
    if reason:
        print(f"  why (num_workers='auto'): {reason}")
    best = analysis.best_result
    print(f"\nbest config: {analysis.best_config}")
    print(f"best episode_return_mean: {best['episode_return_mean']:.1f} after {best['env_steps_total']:,} env steps")
    print(f"results stored in {analysis.experiment_path}/tuner.db ({len(analysis.results_df)} rows); "
          f"reload with tune.load({analysis.experiment_path!r})")


if __name__ == "__main__":
    main()
