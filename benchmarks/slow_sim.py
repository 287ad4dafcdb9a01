"""The workload the product exists for: tuning PPO on a slow, uneven simulator, three systems, one run.

The work, the same for every system (issue 17): a sweep of 4 PPO trials, 2 learning rates
(1e-3, 2.5e-3: SB3 learns CartPole at both) x 2 seeds (drawn once from ``--seed``, given to every
system), 2 trials at once; 8 envs per trial (each in its own process for the peers; ours: see
below); 24,000 env steps per trial
(every system stops a trial at its first iteration boundary at or past it, counting env steps
that are transitions: SB3 and RLlib at 24,576 with batches of 2,048; ours a little later, as its
batches hold slightly fewer transitions: an env's reset takes a slot of its fragment); on
``tuner/SlowCartPole-v1``, CartPole's dynamics behind a step that sleeps 3 ms, or 100 ms with
probability 0.03. The same PPO everywhere: a batch of 2,048 env steps per update (256 steps x 8
envs), 10 epochs, minibatch 512, gamma 0.99, GAE lambda 0.95, clip 0.2, no KL term, no entropy
bonus, value loss 0.5 x the mean squared error, separate 64x64 tanh policy and value nets, Adam, gradient norm 0.5.

* tuner (ours): ``tune.run("PPO")``, one rollout actor per trial holding its 8 envs, each env
  streaming in a thread of its own (``num_workers=1, num_envs_per_worker=8, env_threads=True``;
  ``--env-threads 1``: 8 rollout actors of 1 env, a process per env as the peers have), sampling
  asynchronously (``sample_async=True``: each env steps without pause and its thread loads new
  weights between two steps; the learner takes the steps sampled when the batch is full, so a
  batch holds about 2,048 steps however unevenly the envs stepped), 1 CPU per env and 1 for the
  learner, so Ray packs 2 trials of 8 + 1 CPUs on the 18 it is told.
* Optuna + SB3: the study enqueues the same 4 configs (no sampling); 2 worker processes take them
  in turn; SB3's PPO on ``SubprocVecEnv(8)`` (one process per env, stepped in lock-step).
* Ray Tune + RLlib: ``Tuner("PPO")`` over the same grid, 2 at once, 8 env runners of 1 env
  (1 CPU each) and the learner in the algorithm's process (1 CPU); RLlib's new API stack.

Both Ray systems start Ray with ``ray.init(num_cpus=18, include_dashboard=False)`` inside their
measured time (``--ray-cpus``; default: concurrency x (envs + 1)); Ray's shutdown is outside. The
Optuna + SB3 time runs from creating the study to the last worker process's exit. The sleeping
simulator is what lets 2 real cores host 16 envs and 2 learners (18 CPUs told to Ray): a
CPU-bound simulator needs a real core per env, e.g. the device machine's 16 when one is lent.

Printed per system: the sweep's seconds (and Ray's start inside it), env steps, env steps/s, the
fraction of the ideal (concurrency x envs / the mean step time measured on this machine by
``algorithms.envs.builtin.measure_mean_step``: what the simulators could give if nothing else took time),
the same fraction with Ray's start left out ("Ray up": a cluster that is already running),
the mean over trials of the 100-episode mean return at equal env steps (each trial's curve read
at the smallest final step count of all trials of all systems, interpolated linearly between the
iteration boundaries around it; RLlib's is computed from its episodes, see
benchmarks/peers/raytune_rllib.py), and the ratios against ours (against the first system run
when ours is left out): peer sweep time / ours, ours env steps/s / peer's. Then the return of each
trial config, and for ours where the sweep's time went (its stored profile, as ``tuner show NAME
--profile`` prints it) and how its trials' first and later iterations sampled against the ideal.

    python benchmarks/slow_sim.py                          # all three, several minutes
    python benchmarks/slow_sim.py --repeat 3               # medians of 3 with the spread (README)
    python benchmarks/slow_sim.py --systems tuner --envs 4 --steps 8000
    python benchmarks/slow_sim.py --quick --systems tuner  # tiny: the smoke test's workload
    python benchmarks/slow_sim.py --systems tuner --env-threads 1   # ours with a process per env
    python benchmarks/slow_sim.py --systems tuner --env-threads auto  # ours as num_workers="auto" lays it out

The machine may be shared: each system's note gives the 1-minute load average when it started,
and ``--repeat`` starts each repeat with the next system in turn, so a drift in load does not
always fall on the same one. A peer whose package is missing is skipped with one line
(``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Ray's workers and the simulators' processes import this tree's packages too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from benchmarks.peers.common import (CLIP, ENTROPY_COEF, GAE_LAMBDA, GAMMA, HIDDEN, MAX_GRAD_NORM,  # noqa: E402
                                     VF_COEF, Outcome, Workload, ray_init, spread,
                                     systems_in_turn)

SYSTEMS = ("tuner", "optuna", "rllib")
QUICK = {"lrs": "2.5e-3", "seeds": 2, "envs": 2, "steps": 1000, "fast_ms": 1.0, "slow_prob": 0.0,
         "cpus_per_env": 0.25, "learner_cpus": 0.5}


# -- ours ------------------------------------------------------------------------------------------
def run_tuner(work: Workload, storage: str) -> tuple[Outcome, Any]:
    """Our sweep, from ``ray.init`` to ``tune.run``'s return; everything read back from the store."""
    import ray
    from tuner import tune

    start = time.perf_counter()
    ray_start = ray_init(work.ray_cpus)
    analysis = tune.run(
        "PPO",
        config={
            "env": "tuner/SlowCartPole-v1", "env_config": work.env_config,
            **_layout(work), "num_cpus_for_learner": work.learner_cpus,
            "train_batch_size": work.batch, "minibatch_size": work.minibatch, "num_epochs": work.epochs,
            "gamma": GAMMA, "lambda": GAE_LAMBDA, "clip_param": CLIP,
            # SB3's and RLlib's value loss is vf_coef * mean((v - R)^2), ours (CleanRL's)
            # vf_loss_coeff * 0.5 * mean((v - R)^2): twice the coefficient is the same objective.
            "vf_loss_coeff": 2 * VF_COEF, "vf_clip_param": None,
            "entropy_coeff": ENTROPY_COEF, "max_grad_norm": MAX_GRAD_NORM, "hidden_sizes": list(HIDDEN),
            "activation": "tanh",
            "lr": tune.grid_search(list(work.lrs)), "seed": tune.grid_search(list(work.seeds)),
        },
        stop={"env_steps_total": work.steps},
        max_concurrent_trials=work.concurrency,
        metric="episode_return_mean", mode="max",
        storage_path=storage, name=f"slow_sim_{time.strftime('%Y%m%d_%H%M%S')}", verbose=0,
    )
    elapsed = time.perf_counter() - start
    configs = {t.trial_id: (float(t.config["lr"]), int(t.config["seed"])) for t in analysis.trials}
    curves = {}
    for trial_id, frame in analysis.trial_dataframes.items():
        curves[configs[trial_id]] = [(int(s), float(r)) for s, r in
                                     zip(frame["env_steps_total"], frame["episode_return_mean"])]
    steps = sum(curve[-1][0] for curve in curves.values() if curve)
    bad = [f"{t.trial_id} {t.status}" for t in analysis.trials if t.status != "TERMINATED"]
    layouts = sorted({str((t.last_result or {}).get("sampling_layout")) for t in analysis.trials})
    ray.shutdown()
    note = f"trials not terminated: {bad}; " if bad else ""
    return Outcome("tuner (ours)", elapsed, steps, curves, ray_start_s=ray_start,
                   note=note + f"sampling: {', '.join(layouts)}"), analysis


def _layout(work: Workload) -> dict[str, Any]:
    """Our trials' sampling keys: ``--env-threads K`` actors of K env threads (1: a process per
    env), or (``--env-threads auto``) what ``num_workers="auto"`` decides from its timing."""
    if work.env_threads == 0:
        return {"num_workers": "auto", "num_envs_per_worker": work.envs}
    return {"num_workers": work.envs // work.env_threads, "num_envs_per_worker": work.env_threads,
            "sample_async": True, "env_threads": work.env_threads > 1,
            "num_cpus_per_worker": work.cpus_per_env * work.env_threads}


def _env_threads(text: str) -> int:
    return 0 if text == "auto" else _positive(int, 1)(text)


def ours_iterations(analysis: Any, work: Workload, mean_step_s: float) -> str:
    """Where our trials' iterations went: the first (rollout actors start in it) against the rest,
    sampling against the ideal (a batch over ``envs`` simulators stepping without pause)."""
    ideal = work.batch * mean_step_s / work.envs
    first, first_sample, later_sample, learn, later_steps = [], [], [], [], 0
    for frame in analysis.trial_dataframes.values():
        sample, learned = frame["sample_time_s"].tolist(), frame["learn_time_s"].tolist()
        first.append(sample[0] + learned[0])
        first_sample.append(sample[0])
        later_sample.extend(sample[1:])
        learn.extend(learned)
        later_steps += int(frame["env_steps_this_iter"][1:].sum())
    if not first:
        return ""
    line = (f"ours per iteration: the first {statistics.mean(first):.2f} s (sampling {statistics.mean(first_sample):.2f} s, "
            f"ideal {ideal:.2f} s: the rollout actors start in it)")
    if later_sample:
        ideal_later = later_steps * mean_step_s / work.envs
        line += (f"; the later ones sample at {ideal_later / sum(later_sample):.1%} of the ideal; "
                 f"learning {statistics.mean(learn):.2f} s per iteration")
    return line


def ours_trial_starts(analysis: Any, work: Workload) -> str:
    """Each trial's start, by round (a round: the trials that start together, ``concurrency`` of
    them, in the order their first results came): the trial's own start (a new actor's boot, the
    trainer's set-up) and its rollout actors' start up to their first fragment (the part that
    overlapped the set-up counted once), from the stored per-trial profile and first result."""
    profiles = analysis.trial_profiles()
    firsts = []
    for trial_id, frame in analysis.trial_dataframes.items():
        row = frame.iloc[0]
        began = float(row["timestamp"]) - float(row["time_total_s"])
        firsts.append((began, trial_id, row))
    firsts.sort()
    lines = ["ours: trial start per trial (seconds of wall time on the trial's resources)",
             f"{'trial':>12} {'round':>5} {'trial start':>11} {'rollout start':>13} {'actors new/reused':>17} "
             f"{'first iteration':>15}"]
    rounds: dict[int, list[float]] = {}
    for i, (_, trial_id, row) in enumerate(firsts):
        rnd = i // max(work.concurrency, 1) + 1
        prof = profiles.get(trial_id, {})
        start, rollout = float(prof.get("start_s", 0.0)), float(prof.get("rollout_start_s", 0.0))
        rounds.setdefault(rnd, []).append(start)
        new, reused = int(row.get("num_workers_started", 0)), int(row.get("num_workers_reused", 0))
        lines.append(f"{trial_id:>12} {rnd:>5} {start:11.2f} {rollout:13.2f} {f'{new}/{reused}':>17} "
                     f"{float(row['sample_time_s']) + float(row['learn_time_s']):15.2f}")
    lines.append("trial start per round (mean): " + ", ".join(
        f"round {r} {statistics.mean(v):.2f} s" for r, v in sorted(rounds.items())))
    return "\n".join(lines)


# -- the table -------------------------------------------------------------------------------------
@dataclasses.dataclass
class Row:
    system: str
    sweep_s: float
    ray_start_s: float | None
    env_steps: int
    steps_per_s: float
    of_ideal: float
    of_ideal_ray_up: float  # the same without Ray's start (a cluster that is already up)
    ret: float
    sweep_ratio: float  # peer sweep / ours
    speed_ratio: float  # ours env steps/s / peer's
    note: str = ""


def rows_of(outcomes: list[Outcome], ideal: float) -> tuple[list[Row], int]:
    """The table's rows (ratios against the first outcome, ours) and the step count returns are read at."""
    finals = [s for o in outcomes for s in o.final_steps()]
    at = min(finals) if finals else 0
    ours = outcomes[0]
    rows = []
    for o in outcomes:
        ray_up_s = o.sweep_s - (o.ray_start_s or 0.0)
        rows.append(Row(o.system, o.sweep_s, o.ray_start_s, o.env_steps, o.steps_per_s, o.steps_per_s / ideal,
                        o.env_steps / max(ray_up_s, 1e-9) / ideal, o.return_at(at), o.sweep_s / ours.sweep_s, ours.steps_per_s / max(o.steps_per_s, 1e-9), o.note))
    return rows, at


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def print_table(rows: list[Row], at: int, ideal: float, out=sys.stdout) -> None:
    print(f"ideal {ideal:,.0f} env steps/s; returns: 100-episode mean at {at:,} env steps, mean over trials", file=out)
    print(f"{'system':18} {'sweep s':>8} {'Ray start s':>11} {'env steps':>10} {'env steps/s':>11} {'of ideal':>8} "
          f"{'Ray up':>7} {'return':>7} {'peer/ours sweep':>15} {'ours/peer steps/s':>17}", file=out)
    for r in rows:
        print(f"{r.system:18} {r.sweep_s:8.1f} {_f(r.ray_start_s, '11.1f'):>11} {r.env_steps:10,d} {r.steps_per_s:11,.0f} "
              f"{r.of_ideal:8.1%} {r.of_ideal_ray_up:7.1%} {_f(r.ret, '7.1f'):>7} {r.sweep_ratio:15.2f} {r.speed_ratio:17.2f}"
              + (f"  ({r.note})" if r.note else ""), file=out)


def print_returns(outcomes: list[Outcome], work: Workload, at: int, out=sys.stdout) -> None:
    print(f"\n100-episode mean return at {at:,} env steps, per trial config", file=out)
    print(f"{'lr':>8} {'seed':>6} " + " ".join(f"{o.system:>18}" for o in outcomes), file=out)
    for lr, seed in work.configs:
        print(f"{lr:8.2g} {seed:6d} " + " ".join(f"{_f(o.return_of((lr, seed), at), '18.1f'):>18}" for o in outcomes),
              file=out)


def print_medians(runs: list[list[Row]], ideals: list[float], out=sys.stdout) -> None:
    print(f"\nmedians of {len(runs)} runs [min-max]; ideal {spread(ideals, ',.0f')} env steps/s", file=out)
    print(f"{'system':18} {'sweep s':>20} {'env steps/s':>22} {'of ideal %':>21} {'Ray up %':>21} {'return':>21} "
          f"{'peer/ours sweep':>18} {'ours/peer steps/s':>18}", file=out)
    for system in dict.fromkeys(r.system for rows in runs for r in rows):
        mine = [r for rows in runs for r in rows if r.system == system]
        print(f"{system:18} {spread([r.sweep_s for r in mine], '.1f'):>20} "
              f"{spread([r.steps_per_s for r in mine], ',.0f'):>22} {spread([r.of_ideal * 100 for r in mine], '.1f'):>21} "
              f"{spread([r.of_ideal_ray_up * 100 for r in mine], '.1f'):>21} "
              f"{spread([r.ret for r in mine], '.1f'):>21} {spread([r.sweep_ratio for r in mine], '.2f'):>18} "
              f"{spread([r.speed_ratio for r in mine], '.2f'):>18}", file=out)


# -- the run ---------------------------------------------------------------------------------------
def _positive(kind: type, minimum: float, inclusive: bool = True) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value < minimum or (not inclusive and value == minimum):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {minimum}, got {text}")
        return value
    return parse


def _lrs(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers > 0, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Workload, list[str]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, from tuner, optuna, rllib (default: all)")
    p.add_argument("--lrs", type=_lrs, default=(1e-3, 2.5e-3), help="learning rates (default 1e-3,2.5e-3)")
    p.add_argument("--seeds", type=_positive(int, 1), default=2, help="seeds per lr, drawn from --seed (default 2)")
    p.add_argument("--seed", type=_positive(int, 0), default=0, help="draws the trials' seeds (default 0)")
    p.add_argument("--envs", type=_positive(int, 1), default=8, help="envs per trial, one process each (default 8)")
    p.add_argument("--env-threads", type=_env_threads, default=None,
                   help="ours: envs per rollout actor, each streaming in a thread of its own (env_threads=True); "
                        "default: all of a trial's envs in one actor; 1: a process per env, as the peers; "
                        "auto: num_workers='auto' decides")
    p.add_argument("--steps", type=_positive(int, 1), default=24_000, help="env steps per trial (default 24000)")
    p.add_argument("--concurrency", type=_positive(int, 1), default=2, help="trials at once (default 2)")
    p.add_argument("--rollout", type=_positive(int, 1), default=256,
                   help="steps of each env per update; batch = rollout x envs (default 256)")
    p.add_argument("--minibatch", type=_positive(int, 1), default=512, help="minibatch size (default 512)")
    p.add_argument("--epochs", type=_positive(int, 1), default=10, help="epochs per update (default 10)")
    p.add_argument("--fast-ms", type=_positive(float, 0.0), default=3.0, help="the usual step, ms (default 3)")
    p.add_argument("--slow-ms", type=_positive(float, 0.0), default=100.0, help="the slow step, ms (default 100)")
    p.add_argument("--slow-prob", type=_positive(float, 0.0), default=0.03, help="probability of a slow step (default 0.03)")
    p.add_argument("--cpus-per-env", type=_positive(float, 0.0, inclusive=False), default=1.0,
                   help="CPUs told to Ray per rollout actor / env runner (default 1)")
    p.add_argument("--learner-cpus", type=_positive(float, 0.0, inclusive=False), default=1.0,
                   help="CPUs told to Ray per trial's learner (default 1)")
    p.add_argument("--ray-cpus", type=_positive(float, 0.0, inclusive=False), default=None,
                   help="CPUs told to Ray (default: concurrency x (envs x cpus-per-env + learner-cpus))")
    p.add_argument("--repeat", type=_positive(int, 1), default=1, help="run everything N times, print medians")
    p.add_argument("--storage", default=None, help="where the sweeps are stored (default: a temporary folder)")
    quick = ", ".join(f"--{key.replace('_', '-')} {value}" for key, value in QUICK.items())
    p.add_argument("--quick", action="store_true", help=f"a tiny workload (the smoke test's), overriding: {quick}")
    args = p.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, _lrs(value) if key == "lrs" else value)
    if args.slow_prob > 1:
        p.error(f"--slow-prob: must be a probability in [0, 1], got {args.slow_prob}")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        p.error(f"--systems: unknown {unknown} (allowed: {', '.join(SYSTEMS)})")
    import numpy as np

    seeds = tuple(int(s) for s in np.random.default_rng(args.seed).choice(100_000, size=args.seeds, replace=False))
    if args.env_threads is None:
        args.env_threads = args.envs
    if args.env_threads and args.envs % args.env_threads:
        p.error(f"--env-threads: must divide --envs ({args.envs}), got {args.env_threads}")
    trial_cpus = args.envs * args.cpus_per_env + args.learner_cpus
    ray_cpus = args.ray_cpus if args.ray_cpus is not None else args.concurrency * trial_cpus
    if ray_cpus < trial_cpus:
        p.error(f"--ray-cpus: {ray_cpus:g} CPUs cannot hold one trial of {trial_cpus:g} CPUs")
    work = Workload(lrs=args.lrs, seeds=seeds, envs=args.envs, steps=args.steps, concurrency=args.concurrency,
                    rollout=args.rollout, minibatch=args.minibatch, epochs=args.epochs, fast_ms=args.fast_ms,
                    slow_ms=args.slow_ms, slow_prob=args.slow_prob, cpus_per_env=args.cpus_per_env,
                    learner_cpus=args.learner_cpus, ray_cpus=ray_cpus, env_threads=args.env_threads)
    return args, work, [s for s in SYSTEMS if s in systems]


#: peer -> (label, the packages it needs, the module that runs it)
PEERS = {"optuna": ("Optuna + SB3", ("stable_baselines3", "optuna"), "benchmarks.peers.optuna_sb3"),
         "rllib": ("Ray Tune + RLlib", ("ray.rllib", "ray.tune"), "benchmarks.peers.raytune_rllib")}


def run_once(work: Workload, systems: list[str], storage: str, rotate: int = 0) -> tuple[list[Outcome], Any, float]:
    """Every chosen system once, starting with the ``rotate``-th (repeats start with each system
    in turn, so a drift in the machine's load does not always fall on the same one); returns the
    outcomes in table order (ours first), our analysis and the measured mean step."""
    from algorithms.envs.builtin import measure_mean_step

    mean_step = measure_mean_step(work.env_config)
    ideal = min(work.concurrency, work.trials) * work.envs / mean_step
    print(f"measured mean step {mean_step * 1000:.2f} ms: ideal {ideal:,.0f} env steps/s", flush=True)
    outcomes, analysis = {}, None
    for key, load in systems_in_turn(systems, rotate, PEERS):
        if key == "tuner":
            outcome, analysis = run_tuner(work, storage)
        else:
            outcome = importlib.import_module(PEERS[key][2]).run(work, storage)
        outcome.note = "; ".join(n for n in (f"load {load:.1f} at start", outcome.note) if n)
        outcomes[key] = outcome
    return [outcomes[k] for k in systems if k in outcomes], analysis, mean_step


def main(argv: list[str] | None = None) -> int:
    args, work, systems = parse_args(argv)
    storage = args.storage or tempfile.mkdtemp(prefix="slow_sim_")
    warnings.filterwarnings("ignore")
    logging.getLogger("ray").setLevel(logging.ERROR)
    print(f"slow simulator: {work.trials} PPO trials (lr {', '.join(f'{v:g}' for v in work.lrs)} x seeds "
          f"{', '.join(map(str, work.seeds))}), {work.concurrency} at once, {work.envs} envs per trial, "
          f"{work.steps:,} env steps per trial (stop at {work.steps_per_trial:,}); step {work.fast_ms:g} ms, "
          f"{work.slow_ms:g} ms with p={work.slow_prob:g}; Ray told {work.ray_cpus:g} CPUs; "
          f"{os.cpu_count()} cores here", flush=True)
    runs, ideals = [], []
    for index in range(args.repeat):
        if args.repeat > 1:
            print(f"\n-- run {index + 1} of {args.repeat}", flush=True)
        outcomes, analysis, mean_step = run_once(work, systems, storage, rotate=index)
        if not outcomes:
            print("no system ran")
            return 1
        ideal = min(work.concurrency, work.trials) * work.envs / mean_step
        rows, at = rows_of(outcomes, ideal)
        print()
        print_table(rows, at, ideal)
        print_returns(outcomes, work, at)
        if analysis is not None:
            from tuner.profile import format_profile

            profile = analysis.profile()
            if profile is not None:
                print(f"\nours: {format_profile(profile)}")
            print(ours_iterations(analysis, work, mean_step))
            print(ours_trial_starts(analysis, work))
        runs.append(rows)
        ideals.append(ideal)
    if args.repeat > 1:
        print_medians(runs, ideals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
