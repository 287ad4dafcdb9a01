"""Ray Tune + RLlib on the slow-simulator workload (``benchmarks/slow_sim.py``).

``Tuner("PPO")`` over a grid of the workload's lrs and seeds (the same trials in the same order
as ours), ``max_concurrent_trials=concurrency``. Each trial is RLlib's PPO on its default API
stack (the new one: RLModule and Learner, ``enable_rl_module_and_learner``): ``envs`` env runners
of one env each (``num_envs_per_env_runner=1``), ``cpus_per_env`` CPUs each, the learner in the
algorithm's process (``num_learners=0``) on ``learner_cpus``; the workload's objective and
network (no KL term, lambda, clip, 64x64 tanh with ``vf_share_layers=False``, global gradient
norm 0.5; RLlib's value-loss clip is turned off, as ours and SB3's are), a train batch of
``rollout x envs`` env steps (fragments of ``rollout`` steps), ``minibatch`` and ``epochs``.
Ray is started with ``num_cpus=ray_cpus`` inside the measured time, as ours is.

The return: RLlib's ``env_runners/episode_return_mean`` is a window of ``100 / env runners``
episodes per env runner, merged, not the last 100 episodes of the trial. So each episode's end
time and return are logged by a callback (``on_episode_end``), and the 100-episode mean at each
iteration is computed from them here, the statistic the other systems report.
"""

from __future__ import annotations

import math
import time
from typing import Any

from benchmarks.peers.common import (CLIP, ENTROPY_COEF, GAE_LAMBDA, GAMMA, HIDDEN, MAX_GRAD_NORM, VF_COEF,
                                     Outcome, Workload, make_slow_cartpole, mean_last_100, ray_init)

ENV_NAME = "slow_sim_cartpole"
EPISODES_KEY = "slow_sim_episodes"  # (end time, return) of each episode, in the env runners' results
STEPS_KEY = "num_env_steps_sampled_lifetime"


def _log_episode(*, episode: Any, prev_episode_chunks: Any = None, metrics_logger: Any = None, **kwargs: Any) -> None:
    """Runs in the env runners: every finished episode's end time and return, unreduced. An
    episode that spans several ``sample`` calls comes in chunks: its return is their sum, as in
    RLlib's own episode metrics."""
    if metrics_logger is not None:
        ret = float(episode.get_return()) + sum(float(c.get_return()) for c in prev_episode_chunks or ())
        metrics_logger.log_value(EPISODES_KEY, (time.time(), ret), reduce="item_series")


def _create_env(env_config: Any) -> Any:
    return make_slow_cartpole(**dict(env_config))


def _flat_items(items: Any) -> list[tuple[float, float]]:
    """The logged (time, return) pairs, however the merge of the env runners nested them."""
    if not isinstance(items, (list, tuple)):
        return []
    if len(items) == 2 and all(isinstance(v, (int, float)) for v in items):
        return [(float(items[0]), float(items[1]))]
    return [pair for item in items for pair in _flat_items(item)]


def run(work: Workload, storage: str) -> Outcome:
    """The sweep: from ``ray.init`` to ``Tuner.fit``'s return (Ray's shutdown outside)."""
    import ray
    from ray import tune
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    start = time.perf_counter()
    ray_start = ray_init(work.ray_cpus)
    tune.register_env(ENV_NAME, _create_env)
    episodes: dict[tuple[float, int], list[tuple[float, float]]] = {}
    curves: dict[tuple[float, int], list[tuple[int, float]]] = {}
    own: dict[tuple[float, int], float] = {}  # RLlib's own episode_return_mean at the last iteration
    counted: dict[tuple[float, int], int] = {}  # RLlib's own count of episodes

    class Curves(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            key = (float(trial.config["lr"]), int(trial.config["seed"]))
            runners = result.get("env_runners", {})
            episodes.setdefault(key, []).extend(_flat_items(runners.get(EPISODES_KEY, [])))
            episodes[key].sort()
            returns = [r for _, r in episodes[key]]
            curves.setdefault(key, []).append((int(result[STEPS_KEY]), mean_last_100(returns)))
            own[key] = float(runners.get("episode_return_mean", math.nan))
            counted[key] = int(runners.get("num_episodes_lifetime", -1))

    config = (
        PPOConfig()
        .environment(ENV_NAME, env_config=work.env_config)
        .env_runners(num_env_runners=work.envs, num_envs_per_env_runner=1, num_cpus_per_env_runner=work.cpus_per_env,
                     rollout_fragment_length=work.rollout)
        .learners(num_learners=0, num_cpus_per_learner=work.learner_cpus)
        .resources(num_cpus_for_main_process=work.learner_cpus)
        .training(
            lr=tune.grid_search(list(work.lrs)), gamma=GAMMA, lambda_=GAE_LAMBDA, clip_param=CLIP,
            use_kl_loss=False, kl_coeff=0.0, entropy_coeff=ENTROPY_COEF, vf_loss_coeff=VF_COEF,
            vf_clip_param=math.inf, grad_clip=MAX_GRAD_NORM, grad_clip_by="global_norm",
            train_batch_size_per_learner=work.batch, minibatch_size=work.minibatch, num_epochs=work.epochs,
        )
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(HIDDEN), fcnet_activation="tanh",
                                                   vf_share_layers=False))
        .callbacks(on_episode_end=_log_episode)
        .debugging(seed=tune.grid_search(list(work.seeds)))
    )
    stack = "new API stack" if config.enable_rl_module_and_learner else "old API stack"
    tuner = tune.Tuner(
        "PPO",
        param_space=config,
        tune_config=tune.TuneConfig(max_concurrent_trials=work.concurrency),
        run_config=tune.RunConfig(name=f"slow_sim_rllib_{time.time_ns()}", storage_path=storage, verbose=0,
                                  callbacks=[Curves()], stop={STEPS_KEY: work.steps},
                                  # no checkpoint at the end: no other system writes one
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False)),
    )
    grid = tuner.fit()
    elapsed = time.perf_counter() - start
    errors = [str(r.error).splitlines()[0][:200] for r in grid if r.error]
    steps = sum(curve[-1][0] for curve in curves.values() if curve)
    own_mean = sum(own.values()) / len(own) if own else math.nan
    note = f"{stack}; RLlib's own episode_return_mean at the end {own_mean:.1f}"
    lost = {k: (len(episodes.get(k, [])), n) for k, n in counted.items() if n != len(episodes.get(k, []))}
    if lost:
        note += f"; episodes logged / RLlib's count: {lost}"
    if errors:
        note += f"; {len(errors)} trials failed: {errors[0]}"
    ray.shutdown()
    return Outcome("Ray Tune + RLlib", elapsed, steps, curves, ray_start_s=ray_start, note=note)
