"""Ray Tune + RLlib in the race (``benchmarks/sweep_race.py``).

``Tuner("PPO")`` with Ray Tune's ``ASHAScheduler`` on env steps. Shared mode: a grid over the
race's list (``race.shared_domains``: the trials in the list's order, each with its PPO seed).
Own mode: Ray Tune's default random search (``BasicVariantGenerator(random_state=seed)``) over
the space, every trial on RLlib seed ``seed``.

Each trial is RLlib's PPO on its default (new) API stack, sampling in the algorithm's process
(``num_env_runners=0``, ``ENVS`` envs in its env runner, fragments of ``train_batch_size / ENVS``)
with the learner there too (``num_learners=0``): 1 CPU per trial, as ours. The race's objective
and network: GAE lambda, clip, no KL term, value loss ``VF_COEF x`` the squared error without
RLlib's value clip, global gradient norm 0.5, separate 64x64 tanh nets. Ray is started by
``common.ray_init`` (dashboard off) inside the measured time, as ours is.

Stopping and ASHA read ``METRIC``, the mean return of the trial's last 100 episodes, added to
each result by an ``on_train_result`` callback from the episodes logged by raytune_rllib.py's
``on_episode_end`` callback: RLlib's own ``env_runners/episode_return_mean`` is a smoothing
window merged across iterations, not that statistic.
"""

from __future__ import annotations

import math
import time
from typing import Any

from benchmarks.peers.common import CLIP, GAE_LAMBDA, HIDDEN, MAX_GRAD_NORM, VF_COEF, mean_last_100, ray_init
from benchmarks.peers.race import (BATCHES, ENTROPIES, ENVS, EPOCHS, GAMMAS, LR, MINIBATCHES, TARGET, Budget,
                                   Outcome, shared_domains)
from benchmarks.peers.raytune_rllib import EPISODES_KEY, STEPS_KEY, _flat_items, _log_episode

METRIC = "episode_return_mean_last_100"
RENAMED = {"train_batch_size": "train_batch_size_per_learner"}  # ours' key -> RLlib's


def _add_mean_of_last_100(*, algorithm: Any, result: dict, **kwargs: Any) -> None:
    """Runs in the trial: appends this iteration's episodes, in end order, and sets ``METRIC``."""
    returns = algorithm.__dict__.setdefault("_race_returns", [])
    returns.extend(r for _, r in sorted(_flat_items(result.get("env_runners", {}).pop(EPISODES_KEY, []))))
    result[METRIC] = mean_last_100(returns)


def space(trials: list[dict[str, Any]] | None, tune: Any) -> dict[str, Any]:
    """The searched keys, RLlib's names: the shared list's grid, or the space (own mode)."""
    if trials is not None:
        return shared_domains(trials, tune, RENAMED)
    return {"lr": tune.loguniform(*LR), "gamma": tune.choice(list(GAMMAS)),
            "entropy_coeff": tune.choice(list(ENTROPIES)), "train_batch_size_per_learner": tune.choice(list(BATCHES)),
            "num_epochs": tune.choice(list(EPOCHS)), "minibatch_size": tune.choice(list(MINIBATCHES))}


def run(budget: Budget, storage: str, trials: list[dict[str, Any]] | None) -> Outcome:
    """The sweep: from ``ray.init`` to ``Tuner.fit``'s return (Ray's shutdown outside)."""
    import ray
    from ray import tune
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.basic_variant import BasicVariantGenerator

    first: list[float] = []
    best: dict[str, float] = {}
    steps: dict[str, int] = {}
    start = time.perf_counter()
    ray_init(budget.cpus)

    class Track(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            value = result.get(METRIC, math.nan)
            if not first and value >= TARGET:
                first.append(time.perf_counter() - start)
            best[trial.trial_id] = max(best.get(trial.trial_id, -math.inf), value)
            steps[trial.trial_id] = int(result[STEPS_KEY])

    searched = space(trials, tune)
    seed = searched.pop("seed", budget.seed)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=ENVS)
        .learners(num_learners=0, num_cpus_per_learner=1)
        .resources(num_cpus_for_main_process=1)
        .training(lambda_=GAE_LAMBDA, clip_param=CLIP, use_kl_loss=False, kl_coeff=0.0, vf_loss_coeff=VF_COEF,
                  vf_clip_param=math.inf, grad_clip=MAX_GRAD_NORM, grad_clip_by="global_norm", **searched)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(HIDDEN), fcnet_activation="tanh",
                                                   vf_share_layers=False))
        .callbacks(on_episode_end=_log_episode, on_train_result=_add_mean_of_last_100)
        .debugging(seed=seed)
    )
    tuner = tune.Tuner(
        "PPO",
        param_space=config,
        tune_config=tune.TuneConfig(
            num_samples=1 if trials is not None else budget.trials,
            search_alg=None if trials is not None else BasicVariantGenerator(random_state=budget.seed),
            scheduler=ASHAScheduler(time_attr=STEPS_KEY, metric=METRIC, mode="max", grace_period=budget.grace,
                                    reduction_factor=budget.reduction_factor, max_t=budget.max_steps),
        ),
        run_config=tune.RunConfig(name=f"race_rllib_{time.time_ns()}", storage_path=storage, verbose=0,
                                  callbacks=[Track()], stop={METRIC: TARGET, STEPS_KEY: budget.max_steps},
                                  # no checkpoint at the end: ours writes none either
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False)),
    )
    grid = tuner.fit()
    elapsed = time.perf_counter() - start
    errors = [str(r.error).splitlines()[0][:200] for r in grid if r.error]
    ray.shutdown()
    return Outcome("Ray Tune + RLlib" if trials is not None else "Ray Tune + RLlib (random)",
                   first[0] if first else None, elapsed, sum(v >= TARGET for v in best.values()), len(grid),
                   sum(steps.values()), note=f"{len(errors)} trials failed: {errors[0]}" if errors else "")
