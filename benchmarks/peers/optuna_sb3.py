"""Optuna + Stable-Baselines3 on the slow-simulator workload (``benchmarks/slow_sim.py``).

The study enqueues exactly the workload's trial configs (lr, seed), in its order, and samples
nothing: ``concurrency`` worker processes share it through one SQLite storage and take the
waiting trials one at a time (Optuna's way of running trials in parallel processes). Each trial
is SB3's PPO on a ``SubprocVecEnv`` of ``envs`` simulators (one process each, stepped in
lock-step: every step waits for the slowest env), with ``n_steps = rollout`` (a batch of
``rollout x envs`` env steps per update), the workload's objective and network, and one torch
thread for its learner (the one CPU every system's learner gets).

Stopping: ``learn(total_timesteps=steps)`` collects whole rollouts while fewer than ``steps``
env steps were taken, so a trial stops at its first rollout boundary at or past ``steps``: the
rule of the Ray systems' ``stop`` (checked after each iteration), and the same step count.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.peers.common import (CLIP, ENTROPY_COEF, GAE_LAMBDA, GAMMA, HIDDEN, MAX_GRAD_NORM, VF_COEF,
                                     Outcome, Workload, make_slow_cartpole, mean_last_100)

ENQUEUED_ATTR = "slow_sim"  # user attribute of the enqueued trials
CURVE_ATTR = "curve"  # user attribute: [[env steps, 100-episode mean return], ...] at rollout ends


def _objective(trial, work: Workload) -> float:
    """One SB3 trial; the config comes from the enqueued trial (fixed params, nothing sampled)."""
    import optuna
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    if not trial.user_attrs.get(ENQUEUED_ATTR):
        # Another worker took the last enqueued config: nothing is left to run.
        trial.study.stop()
        raise optuna.TrialPruned("the queue of configs is empty")
    lr = trial.suggest_categorical("lr", list(work.lrs))
    seed = trial.suggest_categorical("seed", list(work.seeds))

    class Curve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.points: list[list[float]] = []

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:  # after the rollout, before its update: our iteration's result
            returns = [float(e["r"]) for e in self.model.ep_info_buffer]  # SB3 keeps the last 100
            self.points.append([int(self.num_timesteps), mean_last_100(returns)])

    env = make_vec_env(make_slow_cartpole, n_envs=work.envs, seed=seed, vec_env_cls=SubprocVecEnv,
                       env_kwargs=work.env_config)
    try:
        model = PPO(
            "MlpPolicy", env, learning_rate=lr, n_steps=work.rollout, batch_size=work.minibatch,
            n_epochs=work.epochs, gamma=GAMMA, gae_lambda=GAE_LAMBDA, clip_range=CLIP, ent_coef=ENTROPY_COEF,
            vf_coef=VF_COEF, max_grad_norm=MAX_GRAD_NORM, seed=seed, device="cpu", verbose=0,
            policy_kwargs={"net_arch": {"pi": list(HIDDEN), "vf": list(HIDDEN)}, "activation_fn": torch.nn.Tanh},
        )
        curve = Curve()
        model.learn(total_timesteps=work.steps, callback=curve)
    finally:
        env.close()
    trial.set_user_attr(CURVE_ATTR, json.dumps(curve.points))
    trial.set_user_attr("env_steps", int(model.num_timesteps))
    return curve.points[-1][1] if curve.points else math.nan


def _worker(storage_url: str, study_name: str, work: Workload, pop_lock: Any) -> None:
    """One worker process: trials from the shared study until its queue of configs is empty.

    Each takes the next enqueued config with ``study.ask()`` under a lock the workers share:
    two workers popping the same waiting trial from SQLite at once both run it, and the second
    ``tell`` fails ("Cannot tell a COMPLETE trial", seen with optuna 5)."""
    import optuna
    import torch
    from optuna.trial import TrialState

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    study = optuna.load_study(study_name=study_name, storage=storage_url)
    while True:
        with pop_lock:
            if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                return
            trial = study.ask()
        study.tell(trial, _objective(trial, work))


def run(work: Workload, storage: str) -> Outcome:
    """The sweep: from creating the study to the last worker's exit (process starts, imports and
    the simulators' start included, as the Ray systems' engine start is)."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.perf_counter()
    url = f"sqlite:///{Path(storage) / 'optuna_slow_sim.db'}"
    name = f"slow_sim_{time.time_ns()}"
    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    for lr, seed in work.configs:
        study.enqueue_trial({"lr": lr, "seed": seed}, user_attrs={ENQUEUED_ATTR: True})
    context = multiprocessing.get_context("spawn")
    pop_lock = context.Lock()
    procs = [context.Process(target=_worker, args=(url, name, work, pop_lock))
             for _ in range(min(work.concurrency, work.trials))]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - start

    curves, steps, notes = {}, 0, []
    for trial in optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False):
        if not trial.user_attrs.get(ENQUEUED_ATTR):
            continue  # a worker's look into the empty queue: no step ran
        if trial.state != TrialState.COMPLETE:
            notes.append(f"trial {trial.params} {trial.state.name}")
            continue
        curves[(trial.params["lr"], trial.params["seed"])] = [tuple(p) for p in json.loads(trial.user_attrs[CURVE_ATTR])]
        steps += int(trial.user_attrs["env_steps"])
    bad = [p.exitcode for p in procs if p.exitcode]
    if bad:
        notes.append(f"worker exit codes {bad}")
    return Outcome("Optuna + SB3", elapsed, steps, curves, note="; ".join(notes))
