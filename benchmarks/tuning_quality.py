"""The answer's quality at equal budget: each system tunes PPO on the same task, its chosen config
is then trained on fresh seeds and evaluated the same way (issue 46).

The work, the same for every system (``benchmarks/peers/quality.py`` holds the numbers):

* The tasks: ``doorkey``, MiniGrid-DoorKey-5x5-v0 with the agent's 7x7 view flattened (codes / 10,
  an MLP for every system), and ``halfcheetah``, MuJoCo's HalfCheetah-v5 with its observations
  normalised by running statistics (frozen while evaluating). PPO with the task's envs, rollout,
  minibatch, GAE lambda, value coefficient and gradient norm; separate 64x64 tanh policy and
  value nets; one torch thread and one CPU per trial, as many trials at once as ``--cpus``.
* The search: the task's space (lr log-uniform; gamma, entropy bonus, epochs, clip range from
  lists), ``trials`` configs drawn by each system's random search seeded with the tuning seed, ASHA
  on env steps with the same rungs everywhere (grace period x reduction factor^k up to max_t;
  Optuna: its successive-halving pruner on those rungs).
* The score: the mean return of the task's deterministic evaluation episodes, played every
  ``eval_every`` env steps on env seeds no training env gets; a trial's score is its latest.
* The answer: the searched keys of the trial with the best score among those that ran the full
  budget (ASHA's survivors).
* The check: the answer trained by the same system on fresh seeds 10000, 10001, ... (``--fresh-seeds``,
  default 5; none of them a sweep's), the full budget each, two at a time on 2 CPUs; per system
  the IQM with a 95% bootstrap interval and the mean of their final scores (tuner.held_out's
  statistics: scipy's bootstrap), as ``tuner validate`` reports a sweep's top configs.
* Wall time: the sweep from before its engine starts (Ray, or Optuna's study and worker processes)
  to its end; the check's time apart.

Systems: ours (``tune.run("PPO", ...)``, sampling in the trial's process), Optuna + SB3
(``benchmarks/peers/quality_optuna_sb3.py``: one worker process per CPU on one study, SB3's PPO
on a DummyVecEnv, VecNormalize for the observations) and Ray Tune + RLlib
(``benchmarks/peers/quality_raytune_rllib.py``: ``Tuner("PPO")``, RLlib's own evaluation episodes,
its MeanStdFilter connector). A peer that is not installed is skipped with a line saying how to
install it.

    python benchmarks/tuning_quality.py                         # both tasks, every system
    python benchmarks/tuning_quality.py --tasks doorkey --systems tuner,optuna --tuning-seeds 0,1
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Ray's workers build the tasks' envs from this tree's benchmarks.peers.quality.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from benchmarks.peers.common import ray_init  # noqa: E402
from benchmarks.peers.quality import (FRESH_SEED_BASE, TASKS, Outcome, Task, check_task, env_creator,  # noqa: E402
                                      with_budget)

SYSTEMS = ("tuner", "optuna", "rllib")
#: peer -> (label, the packages it needs, the module that runs it)
PEERS = {"optuna": ("Optuna + SB3", ("stable_baselines3", "optuna"), "benchmarks.peers.quality_optuna_sb3"),
         "rllib": ("Ray Tune + RLlib", ("ray.rllib", "tree", "lz4"), "benchmarks.peers.quality_raytune_rllib")}
METRIC = "evaluation/episode_return_mean"
STEPS = "env_steps_total"


# -- ours ------------------------------------------------------------------------------------------
def ours_config(task: Task, tune: Any, searched: dict[str, Any] | None = None) -> dict[str, Any]:
    """Our PPO on the task; the space as ``tune`` domains, or the ``searched`` values (the check)."""
    s = task.space
    space = searched or {
        "lr": tune.loguniform(*s.lr), "gamma": tune.choice(list(s.gamma)),
        "entropy_coeff": tune.choice(list(s.entropy_coeff)), "num_epochs": tune.choice(list(s.num_epochs)),
        "clip_param": tune.choice(list(s.clip_param)),
    }
    return {
        "env": env_creator(task.name), "num_workers": 0, "num_envs_per_worker": task.envs, "num_cpus_for_learner": 1,
        "train_batch_size": task.batch, "minibatch_size": task.minibatch, "lr_schedule": "constant",
        "lambda_": task.gae_lambda, "vf_loss_coeff": 2 * task.vf_coef,  # ours: coeff x 0.5 x squared error
        "max_grad_norm": task.max_grad_norm,
        "model": {"hidden_sizes": list(task.hidden), "activation": "tanh", "shared_layers": False},
        **({"observation_filter": "MeanStdFilter"} if task.normalize_observations else {}),
        "evaluation_interval": task.eval_interval, "evaluation_duration": task.eval_episodes,
        **space,
    }


def _searched(config: dict[str, Any]) -> dict[str, Any]:
    return {key: config[key] for key in ("lr", "gamma", "entropy_coeff", "num_epochs", "clip_param")}


def run_ours(task: Task, tuning_seed: int, cpus: int, fresh: int, storage: str) -> Outcome:
    import ray

    from schedulers import ASHAScheduler
    from tuner import tune

    start = time.perf_counter()
    ray_init(cpus)
    analysis = tune.run(
        "PPO", config=ours_config(task, tune), num_samples=task.trials, seed=tuning_seed, metric=METRIC, mode="max",
        scheduler=ASHAScheduler(time_attr=STEPS, grace_period=task.grace, reduction_factor=task.reduction_factor,
                                max_t=task.max_steps),
        stop={STEPS: task.max_steps}, storage_path=storage, name=f"quality_{task.name}_{tuning_seed}", verbose=0,
        tensorboard=False,
    )
    sweep_s = time.perf_counter() - start
    full = [t for t in analysis.trials if t.last_result and t.last_result[STEPS] >= task.max_steps]
    best = max(full, key=lambda t: t.last_result["evaluation"]["episode_return_mean"])
    outcome = Outcome("tuner (ours)", task.name, tuning_seed, sweep_s, _searched(best.config),
                      best.last_result["evaluation"]["episode_return_mean"])
    start = time.perf_counter()
    check = tune.run(
        "PPO", config={**ours_config(task, tune, outcome.config),
                       "seed": tune.grid_search([FRESH_SEED_BASE + i for i in range(fresh)])},
        stop={STEPS: task.max_steps}, storage_path=storage, name=f"quality_{task.name}_{tuning_seed}_check",
        verbose=0, tensorboard=False,
    )
    outcome.check_s = time.perf_counter() - start
    outcome.scores = [t.last_result["evaluation"]["episode_return_mean"]
                      for t in sorted(check.trials, key=lambda t: t.config["seed"])]
    ray.shutdown()
    return outcome


# -- the table -------------------------------------------------------------------------------------
def _config_text(config: dict[str, Any]) -> str:
    if not config:
        return "-"
    return (f"lr {config['lr']:.1e}, gamma {config['gamma']}, ent {config['entropy_coeff']}, "
            f"epochs {config['num_epochs']}, clip {config['clip_param']}")


def report(task: Task, outcomes: list[Outcome], fresh: int) -> None:
    print(f"\n{task.name}: {task.env}, {task.trials} trials x {task.max_steps:,} env steps (ASHA: grace "
          f"{task.grace:,}, rf {task.reduction_factor}), score: {task.eval_episodes} deterministic episodes every "
          f"{task.eval_every:,} steps; the answer checked on {fresh} fresh seeds")
    print(f"  {'system':<16} {'seed':>4} {'sweep s':>8} {'sweep best':>10} {'IQM [95% CI]':>26} {'mean':>9} "
          f"{'check s':>8}  answer")
    for o in outcomes:
        q, low, high, mean = o.summary()
        print(f"  {o.system:<16} {o.tuning_seed:>4} {o.sweep_s:>8.1f} {o.sweep_best:>10.3f} "
              f"{f'{q:.3f} [{low:.3f}, {high:.3f}]':>26} {mean:>9.3f} {o.check_s:>8.1f}  {_config_text(o.config)}"
              + (f"  ({o.note})" if o.note else ""))
    ours = [o for o in outcomes if o.system.startswith("tuner")]
    for peer in sorted({o.system for o in outcomes} - {o.system for o in ours}):
        theirs = [o for o in outcomes if o.system == peer]
        if ours and theirs:
            ratio = sum(o.sweep_s for o in ours) / sum(o.sweep_s for o in theirs)
            iqm_ours = sum(o.summary()[0] for o in ours) / len(ours)
            iqm_theirs = sum(o.summary()[0] for o in theirs) / len(theirs)
            print(f"  ours / {peer}: sweep time x{ratio:.2f}; check IQM {iqm_ours:.3f} against {iqm_theirs:.3f}")


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {list(TASKS)}")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {list(SYSTEMS)}")
    parser.add_argument("--tuning-seeds", default="0", help="comma-separated: one sweep per system and seed")
    parser.add_argument("--fresh-seeds", type=int, default=5, help="seeds the answer is checked on")
    parser.add_argument("--cpus", type=int, default=2, help="trials at once, one CPU each")
    parser.add_argument("--trials", type=int, help="trials per sweep (default: the task's)")
    parser.add_argument("--max-steps", type=int, help="env steps per trial (default: the task's)")
    parser.add_argument("--grace", type=int, help="ASHA's first rung in env steps (default: the task's)")
    parser.add_argument("--eval-every", type=int, help="env steps between evaluations (default: the task's)")
    parser.add_argument("--eval-episodes", type=int, help="episodes per evaluation (default: the task's)")
    args = parser.parse_args(argv)
    tasks = args.tasks.split(",")
    systems = args.systems.split(",")
    for flag, names, allowed in (("--tasks", tasks, TASKS), ("--systems", systems, SYSTEMS)):
        unknown = [n for n in names if n not in allowed]
        if unknown:
            parser.error(f"{flag}: unknown {unknown}; allowed: {list(allowed)}")
    try:
        seeds = _int_list(args.tuning_seeds, "--tuning-seeds")
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.fresh_seeds < 2:
        parser.error(f"--fresh-seeds: must be >= 2 (an interval needs two scores), got {args.fresh_seeds}")
    if args.cpus < 1:
        parser.error(f"--cpus: must be >= 1, got {args.cpus}")
    chosen = []
    for name in tasks:
        task = with_budget(TASKS[name], args.trials, args.max_steps, args.grace, args.eval_every, args.eval_episodes)
        try:
            check_task(task)
        except ValueError as exc:
            parser.error(str(exc))
        chosen.append(task)
    runners = {"tuner": run_ours}
    for system in systems:
        if system == "tuner":
            continue
        label, needs, module = PEERS[system]
        missing = [n for n in needs if importlib.util.find_spec(n.split(".")[0]) is None]
        if missing:
            print(f"{label}: skipped, {missing} not installed (pip install -e '.[bench]')")
            continue
        runners[system] = importlib.import_module(module).run
    with tempfile.TemporaryDirectory(prefix="tuning_quality_") as storage:
        for task in chosen:
            outcomes = []
            for seed in seeds:
                for system in systems:
                    if system in runners:
                        outcomes.append(runners[system](task, seed, args.cpus, args.fresh_seeds, storage))
                        o = outcomes[-1]
                        print(f"  {o.system} on {task.name}, tuning seed {seed}: sweep {o.sweep_s:.0f} s, check "
                              f"{o.check_s:.0f} s", flush=True)
            report(task, outcomes, args.fresh_seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
