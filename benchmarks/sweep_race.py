"""The headline race: tune PPO on CartPole-v1, the same sweep through three systems, in one run.

The work, the same for every system (issues 9 and 19):

* The trials. ``--search shared`` (the default): 16 configs drawn once from ``--seed`` with numpy,
  outside every system (lr log-uniform in [1e-4, 3e-3], gamma 0.98/0.99/0.995, entropy
  coefficient 0/0.01, train batch 1024/2048/4096, epochs 4/10, minibatch 64/256) and a distinct
  PPO seed per trial; every system runs this list, in this order, each trial on its seed
  (benchmarks/peers/race.py). ``--search own``: each system samples the same space with its own
  searcher instead (ours: Optuna's TPE through ``tuner.search.OptunaSearch(seed)``, PPO seeds
  drawn by each trial; Optuna: a TPE per worker process, seeded ``seed + worker``, the trial
  number as PPO seed; Ray Tune: its random search seeded ``seed``, every trial on RLlib seed
  ``seed``); the systems then run different trials, and the table labels the searchers.
* The PPO (benchmarks/peers/common.py): GAE lambda 0.95, clip 0.2, no KL term, value loss 0.5 x
  the mean squared error without a value clip, global gradient norm 0.5, the trial's gamma and
  entropy coefficient, separate 64x64 tanh policy and value nets, Adam; 16 CartPole envs per trial,
  stepped as one vector env in the learner's process (train batch / 16 steps of each per update).
* Stopping: a trial ends after the first iteration (a rollout, then its update) whose 100-episode
  mean return (the trial's last 100 episodes) is >= 475, "solved", or at the first at or past ``--max-steps``
  env steps; ASHA on env steps with the same rungs everywhere (grace period 20k, reduction factor
  3, max_t 200k).
* CPUs: one per trial, as many trials at once as the machine has CPUs, one torch thread per learner.
* Warm-up: every system's engine start is counted. Each time runs from before the engine starts
  (``ray.init(num_cpus=CPUs, include_dashboard=False)`` for both Ray systems, through
  ``benchmarks.peers.common.ray_init``; creating the study and spawning its worker processes for
  Optuna) to the sweep's end; Ray's shutdown is outside it.

The systems:

* tuner (ours): ``tune.run("PPO", ...)`` with ``ASHAScheduler``, ``num_workers=0`` (sampling in
  the trial's process), ``num_envs_per_worker=16``; shared mode: a grid over the list's PPO seeds,
  each other key read from its trial (``race.shared_domains``). Our value loss is
  ``vf_loss_coeff x 0.5 x`` the squared error, so ``vf_loss_coeff=1.0`` is the objective above.
* Optuna + Stable-Baselines3 (benchmarks/peers/race_optuna_sb3.py): one worker process per CPU on
  one study in a journal file (JournalStorage), a successive-halving pruner on the same rungs; shared mode: the study enqueues
  the list. SB3's PPO on a ``DummyVecEnv`` of 16 envs; the stop takes effect before the next
  rollout, as ours takes effect before the next iteration.
* Ray Tune + RLlib (benchmarks/peers/race_raytune_rllib.py): ``Tuner("PPO")`` with Ray Tune's
  ASHA, RLlib's new API stack, 0 env runners (16 envs sampled in the algorithm's process) and the
  learner there (1 CPU per trial); shared mode: the same grid as ours. Its stop and ASHA read the
  last-100-episode mean computed from its episodes, not RLlib's smoothed return.

Left unequal, as each library implements PPO: SB3 normalises advantages per minibatch, ours and
RLlib over the train batch; ours' batch holds slightly fewer transitions than the batch size (an
env's reset takes a slot of its fragment), SB3's and RLlib's about that many, so a trial that runs
to ``--max-steps`` may take one iteration more in ours; Optuna's pruner promotes by its own rule
on the same rungs; and which trial reaches a rung first, which ASHA's cuts depend on, follows
each system's speed.

For each system it prints seconds to the first solved trial (from the start, engine start
included), the sweep's seconds, trials solved, total env steps, and our ratios; then our sweep's
time profile (where the wall time went, summed over trials; also ``tuner show NAME --profile``).
``--repeat N`` runs everything N times, each repeat starting with the next system in turn (so a
drift in the shared machine's load does not always fall on the same one), and prints per system
the median and [min-max] of every column. A peer that is not installed is skipped with a line
saying how to install it (``pip install -e '.[bench]'``).

    python benchmarks/sweep_race.py --repeat 3            # all three, shared list (README)
    python benchmarks/sweep_race.py --search own          # each system with its own searcher
    python benchmarks/sweep_race.py --systems tuner,optuna --guard
    python benchmarks/sweep_race.py --trials 2 --max-steps 4000 --grace 2000 --systems tuner   # tiny

``--guard`` is the speed regression guard: exit status 1 unless our sweep takes at most a third of
the best peer's sweep time (the best peer: the fastest sweep) and at most two thirds of its time to
the first solve, solving at least as many trials as it (with ``--repeat``: on the medians).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Ray's workers import this tree's packages too (RLlib's callbacks live in benchmarks.peers).
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from benchmarks.peers.common import (CLIP, GAE_LAMBDA, HIDDEN, MAX_GRAD_NORM, VF_COEF, ray_init,  # noqa: E402
                                     spread, systems_in_turn)
from benchmarks.peers.race import (BATCHES, ENTROPIES, ENVS, EPOCHS, GAMMAS, LR, MINIBATCHES, TARGET,  # noqa: E402
                                   Budget, Outcome, draw_trials, shared_domains)

SYSTEMS = ("tuner", "optuna", "rllib")
#: peer -> (label, the packages it needs, the module that runs it)
PEERS = {"optuna": ("Optuna + SB3", ("stable_baselines3", "optuna"), "benchmarks.peers.race_optuna_sb3"),
         "rllib": ("Ray Tune + RLlib", ("ray.rllib", "ray.tune"), "benchmarks.peers.race_raytune_rllib")}


# -- ours ------------------------------------------------------------------------------------------
def ours_config(trials: list[dict[str, Any]] | None, tune: Any) -> dict[str, Any]:
    """``tune.run``'s config: the race's PPO, and the shared list's grid or the space (own mode)."""
    if trials is not None:
        searched = shared_domains(trials, tune)
    else:
        searched = {"lr": tune.loguniform(*LR), "gamma": tune.choice(list(GAMMAS)),
                    "entropy_coeff": tune.choice(list(ENTROPIES)), "train_batch_size": tune.choice(list(BATCHES)),
                    "num_epochs": tune.choice(list(EPOCHS)), "minibatch_size": tune.choice(list(MINIBATCHES))}
    return {
        "env": "CartPole-v1", "num_workers": 0, "num_envs_per_worker": ENVS, "num_cpus_for_learner": 1,
        "lambda": GAE_LAMBDA, "clip_param": CLIP,
        # SB3's and RLlib's value loss is vf_coef * mean((v - R)^2), ours (CleanRL's)
        # vf_loss_coeff * 0.5 * mean((v - R)^2): twice the coefficient is the same objective.
        "vf_loss_coeff": 2 * VF_COEF, "vf_clip_param": None, "max_grad_norm": MAX_GRAD_NORM,
        "hidden_sizes": list(HIDDEN), "activation": "tanh",
        **searched,
    }


def run_tuner(budget: Budget, storage: str, trials: list[dict[str, Any]] | None) -> tuple[Outcome, Any]:
    """Our sweep, from ``ray.init`` to ``tune.run``'s return (Ray's shutdown outside)."""
    import ray
    from schedulers import ASHAScheduler
    from tuner import tune
    from tuner.search import OptunaSearch

    first: list[float] = []
    start = time.perf_counter()

    class FirstSolve(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            if not first and (result.get("episode_return_mean") or -math.inf) >= TARGET:
                first.append(time.perf_counter() - start)

    ray_init(budget.cpus)
    analysis = tune.run(
        "PPO",
        config=ours_config(trials, tune),
        num_samples=1 if trials is not None else budget.trials,
        seed=budget.seed,
        search_alg=None if trials is not None else OptunaSearch(seed=budget.seed),
        metric="episode_return_mean",
        mode="max",
        scheduler=ASHAScheduler(time_attr="env_steps_total", grace_period=budget.grace,
                                reduction_factor=budget.reduction_factor, max_t=budget.max_steps),
        stop={"episode_return_mean": TARGET, "env_steps_total": budget.max_steps},
        storage_path=storage,
        name=f"race_{time.strftime('%Y%m%d_%H%M%S')}",
        callbacks=[FirstSolve()],
        verbose=0,
    )
    elapsed = time.perf_counter() - start
    frame = analysis.results_df
    best = frame.groupby("trial_id")["episode_return_mean"].max()
    steps = frame.groupby("trial_id")["env_steps_total"].max()
    ray.shutdown()
    outcome = Outcome("tuner (ours)" if trials is not None else "tuner (ours, TPE)", first[0] if first else None,
                      elapsed, int((best >= TARGET).sum()), len(analysis.trials), int(steps.sum()))
    return outcome, analysis


# -- the tables ------------------------------------------------------------------------------------
def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratios(ours: Outcome, o: Outcome) -> tuple[float, float | None]:
    """ours / the system's: sweep time, time to the first solve (None where either never solved)."""
    first = ours.first_solve_s / o.first_solve_s if ours.first_solve_s is not None and o.first_solve_s else None
    return ours.sweep_s / o.sweep_s, first


def print_table(outcomes: list[Outcome], out=sys.stdout) -> None:
    ours = outcomes[0]
    print(f"\n{'system':26} {'first solve s':>13} {'sweep s':>8} {'solved':>7} {'env steps':>10} "
          f"{'ours/sweep':>10} {'ours/first':>10}", file=out)
    for o in outcomes:
        sweep_ratio, first_ratio = _ratios(ours, o)
        print(f"{o.system:26} {_fmt(o.first_solve_s):>13} {o.sweep_s:8.1f} {o.solved:3d}/{o.trials:<3d} "
              f"{o.env_steps:10d} {sweep_ratio:10.2f} {_fmt(first_ratio, 2):>10}"
              + (f"  ({o.note})" if o.note else ""), file=out)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def print_medians(runs: list[list[Outcome]], out=sys.stdout) -> None:
    """Per system, the median [min-max] over the runs of every column (a run where it never
    solved has no first-solve value)."""
    print(f"\nmedians of {len(runs)} runs [min-max]", file=out)
    print(f"{'system':26} {'first solve s':>20} {'sweep s':>20} {'solved':>12} {'env steps':>26} "
          f"{'ours/sweep':>18} {'ours/first':>18}", file=out)
    for system in dict.fromkeys(o.system for run in runs for o in run):
        mine = [(run[0], o) for run in runs for o in run if o.system == system]
        ratios = [_ratios(ours, o) for ours, o in mine]
        print(f"{system:26} {spread([_nan(o.first_solve_s) for _, o in mine], '.1f'):>20} "
              f"{spread([o.sweep_s for _, o in mine], '.1f'):>20} {spread([o.solved for _, o in mine], 'g'):>12} "
              f"{spread([o.env_steps for _, o in mine], '.0f'):>26} {spread([r for r, _ in ratios], '.2f'):>18} "
              f"{spread([_nan(f) for _, f in ratios], '.2f'):>18}", file=out)


def median_outcomes(runs: list[list[Outcome]]) -> list[Outcome]:
    """One outcome per system, each column its median over the runs; a run where the system never
    solved counts as never solving (the median may then be None)."""
    medians = []
    for system in dict.fromkeys(o.system for run in runs for o in run):
        mine = [o for run in runs for o in run if o.system == system]
        first = statistics.median(math.inf if o.first_solve_s is None else o.first_solve_s for o in mine)
        medians.append(Outcome(system, None if math.isinf(first) else first, statistics.median(o.sweep_s for o in mine),
                               int(statistics.median(o.solved for o in mine)), mine[0].trials,
                               int(statistics.median(o.env_steps for o in mine))))
    return medians


def guard(outcomes: list[Outcome]) -> list[str]:
    """What fails issue 9's bar (empty: it holds). The bar is set against the best peer, the one
    with the fastest sweep: at most a third of its sweep time, at most two thirds of its time to
    the first solved trial, and at least as many trials solved as it."""
    ours, peers = outcomes[0], outcomes[1:]
    if not peers:
        return ["no peer ran: nothing to compare against"]
    best = min(peers, key=lambda o: o.sweep_s)
    problems = []
    if ours.sweep_s > best.sweep_s / 3:
        problems.append(f"sweep {ours.sweep_s:.1f} s > a third of {best.system}'s {best.sweep_s:.1f} s")
    if best.first_solve_s is not None and (ours.first_solve_s is None
                                           or ours.first_solve_s > 2 / 3 * best.first_solve_s):
        problems.append(f"first solve {_fmt(ours.first_solve_s)} s > two thirds of {best.system}'s "
                        f"{best.first_solve_s:.1f} s")
    if ours.solved < best.solved:
        problems.append(f"solved {ours.solved} < {best.system}'s {best.solved}")
    return problems


def print_profile(analysis: Any) -> None:
    from tuner.profile import format_profile

    profile = analysis.profile()
    if profile is not None:
        print()
        print(format_profile(profile))


# -- the run ---------------------------------------------------------------------------------------
def run_once(budget: Budget, systems: list[str], storage: str, trials: list[dict[str, Any]] | None,
             rotate: int = 0) -> tuple[list[Outcome], Any]:
    """Every chosen system once, starting with the ``rotate``-th; returns the outcomes in table
    order (ours first) and our analysis."""
    outcomes, analysis = {}, None
    for key, load in systems_in_turn(systems, rotate, PEERS):
        if key == "tuner":
            outcome, analysis = run_tuner(budget, storage, trials)
        else:
            outcome = importlib.import_module(PEERS[key][2]).run(budget, storage, trials)
        outcome.note = "; ".join(n for n in (f"load {load:.1f} at start", outcome.note) if n)
        outcomes[key] = outcome
    return [outcomes[k] for k in systems if k in outcomes], analysis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated, from tuner, optuna, rllib (default: all three; tuner always runs)")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=200_000)
    parser.add_argument("--grace", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0,
                        help="draws the shared list; seeds the searchers of --search own (default 0)")
    parser.add_argument("--search", default="shared", choices=["shared", "own"],
                        help="shared: every system runs the same list of configs and PPO seeds (default); "
                             "own: each system samples with its own searcher (ours TPE, Optuna TPE, Ray Tune random)")
    parser.add_argument("--repeat", type=int, default=1, help="run everything N times, print medians (default 1)")
    parser.add_argument("--storage", default=None, help="where the sweeps are stored (default: a temporary folder)")
    parser.add_argument("--guard", action="store_true", help="exit 1 unless ours meets the bar against the best peer")
    args = parser.parse_args(argv)
    chosen = {s.strip() for s in args.systems.split(",") if s.strip()}
    unknown = chosen - set(SYSTEMS)
    if unknown:
        parser.error(f"--systems: unknown {sorted(unknown)} (allowed: tuner, optuna, rllib)")
    if args.repeat < 1:
        parser.error(f"--repeat: must be >= 1, got {args.repeat}")
    systems = [s for s in SYSTEMS if s in chosen | {"tuner"}]
    budget = Budget(trials=args.trials, max_steps=args.max_steps, grace=args.grace, seed=args.seed,
                    cpus=os.cpu_count() or 1)
    trials = draw_trials(budget.trials, budget.seed) if args.search == "shared" else None
    storage = args.storage or tempfile.mkdtemp(prefix="sweep_race_")
    warnings.filterwarnings("ignore")
    logging.getLogger("ray").setLevel(logging.ERROR)
    print(f"sweep race: {budget.trials} trials, ASHA on env steps (grace {budget.grace}, rf "
          f"{budget.reduction_factor}, max {budget.max_steps}), solved = 100-episode mean >= {TARGET:.0f}; "
          f"{budget.cpus} CPUs, one per trial", flush=True)
    if trials is not None:
        print(f"search: shared, every system runs these {len(trials)} trials in this order "
              f"(drawn from seed {budget.seed}):")
        for t in trials:
            print("  " + ", ".join(f"{k} {v:.3g}" if k == "lr" else f"{k} {v}" for k, v in t.items()))
    else:
        print(f"search: own, each system samples with its own searcher (seed {budget.seed}): the trials differ")

    runs = []
    for index in range(args.repeat):
        if args.repeat > 1:
            print(f"\n-- run {index + 1} of {args.repeat}", flush=True)
        outcomes, analysis = run_once(budget, systems, storage, trials, rotate=index)
        print_table(outcomes)
        print_profile(analysis)
        runs.append(outcomes)
    if args.repeat > 1:
        print_medians(runs)
    if args.guard:
        problems = guard(median_outcomes(runs))
        if problems:
            print("guard FAILED: " + "; ".join(problems))
            return 1
        print("guard passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
