"""Ray Tune + RLlib in ``benchmarks/tuning_quality.py``.

The sweep: ``Tuner("PPO")`` with Ray Tune's random search (``BasicVariantGenerator(random_state=seed)``)
over the task's space, its ``ASHAScheduler`` on env steps with the task's rungs. Each trial is RLlib's
PPO on its default (new) API stack, sampling in the algorithm's process (``num_env_runners=0``, the
task's envs in its env runner, fragments of the task's rollout) with the learner there too (1 CPU per
trial, as ours), RLlib's ``MeanStdFilter`` connector where the task normalises observations, the
task's objective (no KL term, no value clip, global gradient norm) and separate 64x64 tanh nets.
RLlib plays the task's evaluation episodes itself every ``eval_interval`` iterations
(``explore=False``, an evaluation env runner in the algorithm's process, the training filter's
statistics synced to it); a result's score is the latest evaluation's mean return, added by an
``on_train_result`` callback (RLlib's first evaluation comes after ``eval_interval`` iterations, ours
after the first).

The check: the answer on each fresh seed (a grid over ``debugging(seed=...)``), the full budget,
``cpus`` trials at once.
"""

from __future__ import annotations

import math
import time
from typing import Any

from benchmarks.peers.common import ray_init
from benchmarks.peers.quality import FRESH_SEED_BASE, Outcome, Task, env_creator

SCORE = "quality_score"  # the latest evaluation's mean return, in every result
STEPS = "num_env_steps_sampled_lifetime"
KEYS = ("lr", "gamma", "entropy_coeff", "num_epochs", "clip_param")


def _mean_std(env: Any, spaces: Any = None, device: Any = None) -> Any:
    from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter

    return MeanStdFilter()


def _latest_score(*, algorithm: Any, result: dict, **kwargs: Any) -> None:
    # RLlib attaches its last evaluation to the iterations after it too, and past its metrics'
    # window as NaN: a NaN is that stale copy, not a new score.
    value = float(result.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean", math.nan))
    if not math.isnan(value):
        algorithm.__dict__["_quality_score"] = value
    result[SCORE] = algorithm.__dict__.get("_quality_score", math.nan)


def _config(task: Task, searched: dict[str, Any], seed: Any) -> Any:
    from ray import tune
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    name = f"quality_{task.name}"
    tune.register_env(name, env_creator(task.name))
    return (
        PPOConfig()
        .environment(name)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=task.envs, rollout_fragment_length=task.rollout,
                     **({"env_to_module_connector": _mean_std} if task.normalize_observations else {}))
        .learners(num_learners=0, num_cpus_per_learner=1)
        .resources(num_cpus_for_main_process=1)
        .training(train_batch_size_per_learner=task.batch, minibatch_size=task.minibatch, lambda_=task.gae_lambda,
                  use_kl_loss=False, kl_coeff=0.0, vf_loss_coeff=task.vf_coef, vf_clip_param=math.inf,
                  grad_clip=task.max_grad_norm, grad_clip_by="global_norm", **searched)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(task.hidden), fcnet_activation="tanh",
                                                   vf_share_layers=False))
        .evaluation(evaluation_interval=task.eval_interval, evaluation_duration=task.eval_episodes,
                    evaluation_duration_unit="episodes", evaluation_num_env_runners=0,
                    evaluation_config=PPOConfig.overrides(explore=False))
        .callbacks(on_train_result=_latest_score)
        .debugging(seed=seed)
    )


def _fit(task: Task, config: Any, storage: str, name: str, **tune_config: Any) -> Any:
    from ray import tune

    tuner = tune.Tuner("PPO", param_space=config, tune_config=tune.TuneConfig(**tune_config),
                       run_config=tune.RunConfig(name=name, storage_path=storage, verbose=0,
                                                 stop={STEPS: task.max_steps},
                                                 checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False)))
    return tuner.fit()


def run(task: Task, tuning_seed: int, cpus: int, fresh: int, storage: str) -> Outcome:
    """The sweep, from ``ray.init`` to ``Tuner.fit``'s return, then the check on ``fresh`` seeds."""
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.basic_variant import BasicVariantGenerator

    s = task.space
    space = {"lr": tune.loguniform(*s.lr), "gamma": tune.choice(list(s.gamma)),
             "entropy_coeff": tune.choice(list(s.entropy_coeff)), "num_epochs": tune.choice(list(s.num_epochs)),
             "clip_param": tune.choice(list(s.clip_param))}
    start = time.perf_counter()
    ray_init(cpus)
    grid = _fit(task, _config(task, space, tuning_seed), storage, f"rllib_quality_{task.name}_{tuning_seed}",
                num_samples=task.trials, search_alg=BasicVariantGenerator(random_state=tuning_seed),
                scheduler=ASHAScheduler(time_attr=STEPS, metric=SCORE, mode="max", grace_period=task.grace,
                                        reduction_factor=task.reduction_factor, max_t=task.max_steps))
    sweep_s = time.perf_counter() - start
    errors = [str(r.error).splitlines()[0][:200] for r in grid if r.error]
    full = [r for r in grid if r.metrics and r.metrics.get(STEPS, 0) >= task.max_steps]
    if not full:
        ray.shutdown()
        return Outcome("Ray Tune + RLlib", task.name, tuning_seed, sweep_s, {}, math.nan,
                       note=f"no trial ran the full budget; {len(errors)} failed: {errors[:1]}")
    best = max(full, key=lambda r: r.metrics[SCORE])
    outcome = Outcome("Ray Tune + RLlib", task.name, tuning_seed, sweep_s, {k: best.config[k] for k in KEYS},
                      float(best.metrics[SCORE]), note=f"{len(errors)} trials failed: {errors[0]}" if errors else "")
    start = time.perf_counter()
    seeds = [FRESH_SEED_BASE + i for i in range(fresh)]
    check = _fit(task, _config(task, dict(outcome.config), tune.grid_search(seeds)), storage,
                 f"rllib_quality_{task.name}_{tuning_seed}_check")
    outcome.check_s = time.perf_counter() - start
    by_seed = {r.config["seed"]: r.metrics.get(SCORE, math.nan) if r.metrics else math.nan for r in check}
    outcome.scores = [float(by_seed[s]) for s in seeds]
    ray.shutdown()
    return outcome
