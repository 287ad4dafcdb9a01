"""Optuna + Stable-Baselines3 in ``benchmarks/tuning_quality.py``.

The sweep: one worker process per CPU shares one study through a journal file (Optuna's storage
for parallel processes), each worker sampling with a ``RandomSampler`` seeded ``seed + worker``,
a ``SuccessiveHalvingPruner`` on env steps with the task's rungs; the workers together run the
task's trials. Each trial is SB3's PPO on a ``DummyVecEnv`` of the task's envs (in the worker's
process, as ours samples in its learner's), ``VecNormalize`` over the observations where the task
normalises them, the task's network and settings, one torch thread, the trial number as its seed.
Every ``eval_every`` env steps (checked at each rollout's end) it plays the task's evaluation
episodes (``quality.evaluate``: deterministic actions, the observations normalised by the
training statistics, frozen), reports that score to the pruner and stops when pruned.

The check: the answer trained on each fresh seed the same way (the full budget), ``cpus`` at once.
"""

from __future__ import annotations

import math
import multiprocessing
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.peers.quality import FRESH_SEED_BASE, Outcome, Task, env_creator, evaluate

KEYS = ("lr", "gamma", "entropy_coeff", "num_epochs", "clip_param")


def train(task: Task, config: dict[str, Any], seed: int, trial: Any = None) -> tuple[float, int]:
    """SB3's PPO on ``task`` with ``config``: (its latest score, env steps); raises optuna's
    TrialPruned when ``trial``'s pruner stops it."""
    import optuna
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    env = make_vec_env(env_creator(task.name), n_envs=task.envs, seed=seed)
    if task.normalize_observations:
        env = VecNormalize(env, norm_obs=True, norm_reward=False, gamma=config["gamma"])

    class Score(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.latest = math.nan
            self.evaluated = 0  # evaluations played
            self.pruned = False

        def _on_step(self) -> bool:
            return not self.pruned

        def _on_rollout_end(self) -> None:
            if self.num_timesteps // task.eval_every <= self.evaluated:
                return
            self.evaluated = self.num_timesteps // task.eval_every
            model = self.model

            def act(obs: Any) -> Any:
                if task.normalize_observations:
                    obs = env.normalize_obs(obs)
                return model.predict(obs, deterministic=True)[0]

            self.latest = evaluate(act, task.name, task.eval_episodes)
            if trial is not None:
                trial.report(self.latest, self.num_timesteps)
                self.pruned = trial.should_prune()

    model = PPO(
        "MlpPolicy", env, learning_rate=config["lr"], n_steps=task.rollout, batch_size=task.minibatch,
        n_epochs=config["num_epochs"], gamma=config["gamma"], gae_lambda=task.gae_lambda,
        clip_range=config["clip_param"], ent_coef=config["entropy_coeff"], vf_coef=task.vf_coef,
        max_grad_norm=task.max_grad_norm, seed=seed, device="cpu", verbose=0,
        policy_kwargs={"net_arch": {"pi": list(task.hidden), "vf": list(task.hidden)}, "activation_fn": torch.nn.Tanh},
    )
    score = Score()
    try:
        model.learn(total_timesteps=task.max_steps, callback=score)
    finally:
        env.close()
    if score.pruned:
        raise optuna.TrialPruned()
    return score.latest, int(model.num_timesteps)


def _objective(trial: Any, task: Task) -> float:
    s = task.space
    config = {
        "lr": trial.suggest_float("lr", *s.lr, log=True),
        "gamma": trial.suggest_categorical("gamma", list(s.gamma)),
        "entropy_coeff": trial.suggest_categorical("entropy_coeff", list(s.entropy_coeff)),
        "num_epochs": trial.suggest_categorical("num_epochs", list(s.num_epochs)),
        "clip_param": trial.suggest_categorical("clip_param", list(s.clip_param)),
    }
    score, steps = train(task, config, trial.number, trial)
    trial.set_user_attr("env_steps", steps)
    return score


def _storage(path: str) -> Any:
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(path))


def _worker(url: str, name: str, task: Task, seed: int) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    study = optuna.load_study(study_name=name, storage=_storage(url), sampler=optuna.samplers.RandomSampler(seed=seed),
                              pruner=optuna.pruners.SuccessiveHalvingPruner(
                                  min_resource=task.grace, reduction_factor=task.reduction_factor))
    # states=None counts running trials too: the workers together run task.trials.
    study.optimize(lambda trial: _objective(trial, task),
                   callbacks=[optuna.study.MaxTrialsCallback(task.trials, states=None)])


def _check(task: Task, config: dict[str, Any], seed: int, queue: Any) -> None:
    warnings.filterwarnings("ignore")
    queue.put((seed, train(task, config, seed)[0]))


def run(task: Task, tuning_seed: int, cpus: int, fresh: int, storage: str) -> Outcome:
    """The sweep, from creating the study to the last worker's exit (process starts and imports
    included, as the Ray systems' engine start is), then the check on ``fresh`` seeds."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    url = str(Path(storage) / f"optuna_quality_{time.time_ns()}.log")
    name = f"quality_{task.name}_{tuning_seed}"
    optuna.create_study(study_name=name, storage=_storage(url), direction="maximize")
    procs = [context.Process(target=_worker, args=(url, name, task, tuning_seed * 1000 + i))
             for i in range(min(cpus, task.trials))]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    sweep_s = time.perf_counter() - start
    trials = optuna.load_study(study_name=name, storage=_storage(url)).get_trials(deepcopy=False)
    full = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("env_steps", 0) >= task.max_steps]
    bad = [p.exitcode for p in procs if p.exitcode]
    if not full:
        return Outcome("Optuna + SB3", task.name, tuning_seed, sweep_s, {}, math.nan,
                       note=f"no trial ran the full budget; worker exit codes {bad}")
    best = max(full, key=lambda t: t.value)
    outcome = Outcome("Optuna + SB3", task.name, tuning_seed, sweep_s, {k: best.params[k] for k in KEYS}, best.value,
                      note=f"worker exit codes {bad}" if bad else "")
    start = time.perf_counter()
    queue = context.Queue()
    seeds = [FRESH_SEED_BASE + i for i in range(fresh)]
    scores: dict[int, float] = {}
    for at in range(0, len(seeds), cpus):
        batch = [context.Process(target=_check, args=(task, outcome.config, s, queue)) for s in seeds[at:at + cpus]]
        for proc in batch:
            proc.start()
        for _ in batch:
            seed, score = queue.get()
            scores[seed] = score
        for proc in batch:
            proc.join()
    outcome.check_s = time.perf_counter() - start
    outcome.scores = [scores[s] for s in seeds]
    return outcome

