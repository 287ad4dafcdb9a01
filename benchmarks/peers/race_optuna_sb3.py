"""Optuna + Stable-Baselines3 in the race (``benchmarks/sweep_race.py``).

One worker process per CPU shares one study through a journal file (Optuna's storage for running trials in
parallel processes), with a ``SuccessiveHalvingPruner`` on env steps (ASHA's rungs: grace period
x reduction factor^k). Shared mode: the study enqueues the race's list (configs and PPO seeds),
in its order, and samples nothing; the workers take the waiting trials one at a time. Own mode:
each worker samples with a TPE seeded ``seed + worker`` (Optuna's guide for distributed
optimisation) and the trial number is the PPO seed.

Each trial is SB3's PPO on a ``DummyVecEnv`` of ``ENVS`` CartPole envs (in the worker's process,
as ours and RLlib sample in their learner's), ``n_steps = train_batch_size / ENVS``, the race's
objective and network, one torch thread. A trial stops at the end of the update on the rollout
whose end showed the 100-episode mean at the target (SB3's ``ep_info_buffer``) or pruned it, as
ours ends a trial after the iteration whose result stops it; ``learn(total_timesteps=max_steps)``
stops at the first rollout boundary at or past ``max_steps``.
"""

from __future__ import annotations

import math
import multiprocessing
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.peers.common import CLIP, GAE_LAMBDA, HIDDEN, MAX_GRAD_NORM, VF_COEF
from benchmarks.peers.race import (BATCHES, ENTROPIES, ENVS, EPOCHS, GAMMAS, KEYS, LR, MINIBATCHES, TARGET,
                                   Budget, Outcome)

ENQUEUED_ATTR = "race"  # user attribute of the enqueued trials (shared mode)
SEED_ATTR = "ppo_seed"  # user attribute: an enqueued trial's PPO seed


def enqueue(study: Any, trials: list[dict[str, Any]]) -> None:
    for t in trials:
        study.enqueue_trial({key: t[key] for key in KEYS}, user_attrs={ENQUEUED_ATTR: True, SEED_ATTR: t["seed"]})


def trial_config(trial: Any) -> dict[str, Any]:
    """The trial's config with ours' keys: the enqueued values (shared mode) or the sampler's."""
    return {
        "lr": trial.suggest_float("lr", *LR, log=True),
        "gamma": trial.suggest_categorical("gamma", list(GAMMAS)),
        "entropy_coeff": trial.suggest_categorical("entropy_coeff", list(ENTROPIES)),
        "train_batch_size": trial.suggest_categorical("train_batch_size", list(BATCHES)),
        "num_epochs": trial.suggest_categorical("num_epochs", list(EPOCHS)),
        "minibatch_size": trial.suggest_categorical("minibatch_size", list(MINIBATCHES)),
        "seed": int(trial.user_attrs.get(SEED_ATTR, trial.number)),
    }


def _objective(trial: Any, budget: Budget, shared: bool) -> float:
    import optuna
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    if shared and not trial.user_attrs.get(ENQUEUED_ATTR):
        # Another worker took the last enqueued config: nothing is left to run.
        trial.study.stop()
        raise optuna.TrialPruned("the queue of configs is empty")
    c = trial_config(trial)

    class UntilStopped(PPO):
        """SB3's PPO whose ``learn`` ends before the next rollout once a stop is asked: without
        this, a stop asked at a rollout's end takes effect at the next rollout's first step."""

        stop_asked = False
        stopped_at: float | None = None

        def collect_rollouts(self, *args: Any, **kwargs: Any) -> bool:
            if self.stop_asked:
                self.stopped_at = time.time()
                return False
            return super().collect_rollouts(*args, **kwargs)

    class Report(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.pruned = self.solved = False
            self.best = -math.inf

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            buffer = self.model.ep_info_buffer  # the last 100 episodes
            if not buffer:
                return
            value = float(sum(e["r"] for e in buffer) / len(buffer))
            self.best = max(self.best, value)
            trial.report(value, self.num_timesteps)
            if value >= TARGET:
                self.solved = self.model.stop_asked = True
            elif trial.should_prune():
                self.pruned = self.model.stop_asked = True

    env = make_vec_env("CartPole-v1", n_envs=ENVS, seed=c["seed"])
    model = UntilStopped(
        "MlpPolicy", env, learning_rate=c["lr"], n_steps=c["train_batch_size"] // ENVS, batch_size=c["minibatch_size"],
        n_epochs=c["num_epochs"], gamma=c["gamma"], gae_lambda=GAE_LAMBDA, clip_range=CLIP, ent_coef=c["entropy_coeff"],
        vf_coef=VF_COEF, max_grad_norm=MAX_GRAD_NORM, seed=c["seed"], device="cpu", verbose=0,
        policy_kwargs={"net_arch": {"pi": list(HIDDEN), "vf": list(HIDDEN)}, "activation_fn": torch.nn.Tanh},
    )
    report = Report()
    try:
        model.learn(total_timesteps=budget.max_steps, callback=report)
    finally:
        env.close()
    trial.set_user_attr("env_steps", int(model.num_timesteps))
    if report.solved:
        trial.set_user_attr("solved_at", model.stopped_at)  # after the update, as ours reports
    if report.pruned:
        raise optuna.TrialPruned()
    return report.best


def _storage(path: str) -> Any:
    """Optuna's storage for worker processes on one machine: a journal file. Its SQLite storage
    lets two processes pop the same enqueued trial (SQLite has no SELECT ... FOR UPDATE), and the
    second one's tell then kills its worker ("Cannot tell a COMPLETE trial")."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(path))


def _worker(url: str, name: str, budget: Budget, shared: bool, seed: int) -> None:
    import optuna
    import torch
    from optuna.trial import TrialState

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    study = optuna.load_study(study_name=name, storage=_storage(url), sampler=optuna.samplers.TPESampler(seed=seed),
                              pruner=optuna.pruners.SuccessiveHalvingPruner(
                                  min_resource=budget.grace, reduction_factor=budget.reduction_factor))
    objective = lambda trial: _objective(trial, budget, shared)  # noqa: E731
    if shared:
        def stop_when_none_waits(study: Any, trial: Any) -> None:
            if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                study.stop()

        if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            study.optimize(objective, callbacks=[stop_when_none_waits])
    else:
        # states=None counts running trials too: the workers together run budget.trials.
        study.optimize(objective, callbacks=[optuna.study.MaxTrialsCallback(budget.trials, states=None)])


def run(budget: Budget, storage: str, trials: list[dict[str, Any]] | None) -> Outcome:
    """The sweep, from creating the study to the last worker's exit (process starts and imports
    included, as the Ray systems' engine start is). ``trials``: the shared list, or None (own mode)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.perf_counter()
    wall_start = time.time()
    url = str(Path(storage) / f"optuna_race_{time.time_ns()}.log")
    name = f"race_{time.time_ns()}"
    study = optuna.create_study(study_name=name, storage=_storage(url), direction="maximize")
    if trials is not None:
        enqueue(study, trials)
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_worker, args=(url, name, budget, trials is not None, budget.seed + i))
             for i in range(min(budget.cpus, budget.trials))]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - start
    ran = [t for t in optuna.load_study(study_name=name, storage=_storage(url)).get_trials(deepcopy=False)
           if trials is None or t.user_attrs.get(ENQUEUED_ATTR)]  # not a worker's look into the empty queue
    solved_at = [t.user_attrs["solved_at"] for t in ran if "solved_at" in t.user_attrs]
    steps = sum(int(t.user_attrs.get("env_steps", 0)) for t in ran)
    bad = [p.exitcode for p in procs if p.exitcode]
    return Outcome("Optuna + SB3" if trials is not None else "Optuna + SB3 (TPE)",
                   min(solved_at) - wall_start if solved_at else None, elapsed, len(solved_at), len(ran), steps,
                   note=f"worker exit codes {bad}" if bad else "")
