"""ASHA over PPO trials on the slow simulator, with and without elastic rollout actors.

The work, the same for both sweeps: ``--trials`` PPO trials (learning rates x seeds, drawn once
from ``--seed``), all at once, each starting with ``--envs`` envs (``tuner/SlowCartPole-v1``: 3 ms
steps, 100 ms with p=0.03), streaming (``sample_async``), on a Ray told ``--ray-cpus`` CPUs, so that
the trials fill it exactly (learner ``--learner-cpus``, each env (ray_cpus / trials - learner) / envs).
A rollout actor holds ``--env-threads`` of a trial's envs, each stepping in a thread of its own
(``env_threads=True``; default: all of them, one actor per trial, as ``slow_sim.py``); ``--env-threads
1``: a rollout actor (a process) per env. ASHA (Ray Tune's stopping rule) on ``env_steps_total``:
grace period ``--grace``, reduction factor ``--rf``, ``max_t`` ``--max-t``: the first rung stops
most trials.

* fixed: ``ASHAScheduler`` alone: a survivor samples with the actors it started with, and the
  stopped trials' CPUs sit idle.
* elastic: ``ResourceChangingScheduler(ASHAScheduler(...), DistributeResources(add_bundles=True))``:
  the stopped trials' CPUs are shared among the survivors as more rollout actors, in place: each
  added bundle is one more actor of ``--env-threads`` envs (the size of the trial's own actors).
* replay (after fixed): the elastic sweep again, its ``ResourceChangingScheduler`` over the fixed
  sweep's ASHA decisions instead of ASHA's rule (each trial stopped at the rung where the fixed
  sweep's ASHA stopped it): the same trials promoted by construction. ASHA's rule is asynchronous:
  a trial reaching a rung is compared with the trials recorded there before it (the first always
  passes), and here all trials reach the first rung within about a second, in an order that is
  noise; so two sweeps of the same trials promote the same ones only by chance (about 1 in 13
  for the returns measured at the rung, over all orders). ``replay`` is the controlled
  comparison; ``elastic`` shows the same with live decisions.

The simulator: ``slow_sim.py``'s shape (a usual step and one 33x longer with p=0.03) at 5x its
step times by default (15 ms / 500 ms). The 16 CPUs told to Ray are 2 real cores here, and every
env step costs CPU however long the simulator sleeps (the policy's action, the env's Python, the
learner's share): about 0.36 ms of this machine's CPU per step at 80 envs, so the 3 ms simulator's
ideal (80 envs at a 6.1 ms mean step: 13,000 steps/s) would need about 4.7 cores; at 5x the ideal
needs about one. ``--fast-ms 3 --slow-ms 100`` on a machine with the cores that Ray is told.

Printed per sweep: its wall time (``tune.run`` alone: Ray's start is outside), env steps, env
steps/s over the sweep and after the first rung (from the moment the last trial crossed or was
stopped at it to the end), each against the ideal for the CPUs told to Ray (at each moment, the
envs those CPUs hold beside the learners of the trials alive then, over the simulator's mean step
measured here), the rollout actors the survivors ended with, which trials passed the first rung,
and the order in which ASHA saw the trials at the first rung; then each sweep's wall time against
the fixed one's and whether the same trials were promoted.

    python benchmarks/elastic_asha.py                       # 8 trials x 8 envs on 16 CPUs told to Ray
    python benchmarks/elastic_asha.py --trials 4 --envs 2 --ray-cpus 4 --max-t 4096   # small
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from benchmarks.peers.common import ray_init  # noqa: E402

MODES = ("fixed", "elastic", "replay")
LRS = (1e-4, 3e-4, 1e-3, 2.5e-3)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--envs", type=int, default=8, help="envs per trial at its start")
    p.add_argument("--env-threads", type=int, default=None,
                   help="envs per rollout actor, each in a thread of its own (default: --envs; 1: a process per env)")
    p.add_argument("--ray-cpus", type=float, default=16.0)
    p.add_argument("--learner-cpus", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=1024, help="env steps per PPO iteration")
    p.add_argument("--grace", type=int, default=2048, help="ASHA's grace period, in env steps")
    p.add_argument("--rf", type=float, default=4.0, help="ASHA's reduction factor")
    p.add_argument("--max-t", type=int, default=32768, help="ASHA's max_t and each trial's stop, in env steps")
    p.add_argument("--fast-ms", type=float, default=15.0, help="the usual step, ms (default 15: see above)")
    p.add_argument("--slow-ms", type=float, default=500.0, help="the slow step, ms (default 500)")
    p.add_argument("--slow-prob", type=float, default=0.03)
    p.add_argument("--modes", default="fixed,replay,elastic")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1, help="run the modes this many times; medians at the end")
    p.add_argument("--save", default=None, help="write every sweep's outcome, its iterations included, to this JSON file")
    args = p.parse_args(argv)
    if args.trials % len(LRS):
        p.error(f"--trials: a multiple of {len(LRS)} (the learning rates x seeds), got {args.trials}")
    if args.env_threads is None:
        args.env_threads = args.envs
    for name in ("trials", "envs", "env_threads", "batch", "grace", "max_t", "repeat"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    if args.envs % args.env_threads:
        p.error(f"--env-threads: must divide --envs ({args.envs}), got {args.env_threads}")
    if args.rf <= 1:
        p.error(f"--rf: must be > 1, got {args.rf}")
    if args.max_t <= args.grace:
        p.error(f"--max-t: must be above --grace ({args.grace}), got {args.max_t}")
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes: a comma-separated list of {list(MODES)}, got {args.modes!r}")
    if "replay" in modes and ("fixed" not in modes or modes.index("replay") < modes.index("fixed")):
        p.error(f"--modes: replay repeats the fixed sweep's decisions, so fixed must come before it, got {args.modes!r}")
    args.modes = modes
    args.worker_cpus = (args.ray_cpus / args.trials - args.learner_cpus) / args.envs
    if args.worker_cpus <= 0:
        p.error(f"--ray-cpus: {args.ray_cpus:g} CPUs over {args.trials} trials leave nothing for their rollout actors "
                f"beside learners of {args.learner_cpus:g}")
    return args


def trial_configs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The trials' (lr, seed), drawn once: both sweeps run this list, in this order."""
    rng = random.Random(args.seed)
    seeds = [rng.randrange(2**31) for _ in range(args.trials // len(LRS))]
    return [{"lr": lr, "seed": seed} for lr in LRS for seed in seeds]


def replay_scheduler(stops: dict[tuple[float, int], float]) -> Any:
    """A scheduler that stops trial (lr, seed) at the first result at or past ``stops[(lr, seed)]``
    (the rung where another sweep's ASHA stopped it) and lets the others run: ASHA's decisions
    without its dependence on the order results arrive."""
    from schedulers import FIFOScheduler

    class ReplayDecisions(FIFOScheduler):
        def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
            at = stops.get((float(trial.config["lr"]), int(trial.config["seed"])))
            return self.STOP if at is not None and result["env_steps_total"] >= at else self.CONTINUE

    return ReplayDecisions()


def run_sweep(mode: str, args: argparse.Namespace, configs: list[dict[str, Any]], storage: str,
              stops: dict[tuple[float, int], float] | None = None) -> dict[str, Any]:
    """One sweep; ``stops`` (replay): where the fixed sweep's ASHA stopped each trial."""
    import ray
    from schedulers import ASHAScheduler, DistributeResources, ResourceChangingScheduler
    from tuner import tune

    ray_init(args.ray_cpus)
    asha = ASHAScheduler(time_attr="env_steps_total", grace_period=args.grace, reduction_factor=args.rf,
                         max_t=args.max_t)
    base = replay_scheduler(stops or {}) if mode == "replay" else asha
    scheduler = base if mode == "fixed" else ResourceChangingScheduler(base, DistributeResources(add_bundles=True))
    index = {(c["lr"], c["seed"]): i for i, c in enumerate(configs)}
    start = time.perf_counter()
    analysis = tune.run(
        "PPO",
        config={
            "env": "tuner/SlowCartPole-v1",
            "env_config": {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob},
            "num_workers": args.envs // args.env_threads, "num_envs_per_worker": args.env_threads,
            "sample_async": True, "env_threads": args.env_threads > 1,
            "num_cpus_per_worker": args.worker_cpus * args.env_threads, "num_cpus_for_learner": args.learner_cpus,
            "train_batch_size": args.batch, "minibatch_size": min(512, args.batch), "num_epochs": 4,
            "lr": tune.grid_search(sorted({c["lr"] for c in configs})),
            "seed": tune.grid_search(sorted({c["seed"] for c in configs})),
        },
        metric="episode_return_mean", mode="max", scheduler=scheduler,
        stop={"env_steps_total": args.max_t},
        storage_path=storage, name=f"elastic_asha_{mode}_{time.strftime('%Y%m%d_%H%M%S')}", verbose=0,
    )
    wall = time.perf_counter() - start
    frames = {t.trial_id: analysis.trial_dataframes[t.trial_id] for t in analysis.trials}
    configs_of = {t.trial_id: (float(t.config["lr"]), int(t.config["seed"])) for t in analysis.trials}
    # Each row's sampling, spread evenly over its iteration: steps in [began, timestamp].
    rows = []
    rung_at = []  # when each trial crossed (or was stopped at) the first rung
    arrivals = []  # (when, trial index, its score there): what ASHA's first rung saw, in order
    lives = []  # (first sampling, last result) of each trial: a learner holds its CPUs meanwhile
    for tid, df in frames.items():
        for _, row in df.iterrows():
            end = float(row["timestamp"])
            rows.append((end - float(row["time_this_iter_s"]), end, int(row["env_steps_this_iter"])))
        lives.append((float(df["timestamp"].iloc[0]) - float(df["time_this_iter_s"].iloc[0]),
                      float(df["timestamp"].iloc[-1])))
        crossed = df[df["env_steps_total"] >= args.grace]
        rung_at.append(float(crossed["timestamp"].iloc[0]) if len(crossed) else float(df["timestamp"].iloc[-1]))
        if len(crossed):
            arrivals.append((rung_at[-1], index[configs_of[tid]], float(crossed["episode_return_mean"].iloc[0])))
    sweep_end = max(end for _, end, _ in rows)
    sweep_start = min(began for began, _, _ in rows)
    after = max(rung_at)
    steps_after = sum(n * max(0.0, min(end, sweep_end) - max(began, after)) / max(end - began, 1e-9)
                      for began, end, n in rows)
    # promoted: went on past its first result at or over the rung (a stopped trial's is its last)
    passed = {tid for tid, df in frames.items() if int((df["env_steps_total"] >= args.grace).sum()) > 1}
    promoted = sorted(index[configs_of[tid]] for tid in passed)
    survivors_workers = {index[configs_of[tid]]: int(frames[tid]["num_workers"].max()) for tid in passed}
    # Where each trial ended: the rung ASHA stopped it at (None: it ran to max_t).
    milestones = asha.rung_milestones()
    ended_at = {configs_of[tid]: max((m for m in milestones if m <= int(df["env_steps_total"].iloc[-1])), default=None)
                if int(df["env_steps_total"].iloc[-1]) < args.max_t else None for tid, df in frames.items()}
    ray.shutdown()
    return {
        "mode": mode, "wall_s": wall, "env_steps": int(sum(df["env_steps_total"].iloc[-1] for df in frames.values())),
        "start": sweep_start, "end": sweep_end, "after": after, "steps_after": steps_after, "lives": lives,
        "iterations": rows,
        "arrivals": [(when - sweep_start, i, score) for when, i, score in sorted(arrivals)],
        "promoted": promoted, "workers_at_end": survivors_workers, "stops": {k: v for k, v in ended_at.items() if v},
        "bad": [t.status for t in analysis.trials if t.status != "TERMINATED"],
    }


def ideal_steps(args: argparse.Namespace, lives: list[tuple[float, float]], begin: float, end: float,
                mean_step: float) -> float:
    """Env steps the CPUs told to Ray could give from ``begin`` to ``end``: at each moment the envs
    they hold beside the learners of the trials alive then, each stepping every ``mean_step``."""
    edges = sorted({begin, end, *(t for life in lives for t in life if begin < t < end)})
    total = 0.0
    for lo, hi in zip(edges, edges[1:]):
        alive = sum(1 for first, last in lives if first < hi and last > lo)
        total += (hi - lo) * (args.ray_cpus - alive * args.learner_cpus) / args.worker_cpus / mean_step
    return total


def run_modes(args: argparse.Namespace, configs: list[dict[str, Any]], mean_step: float) -> list[dict[str, Any]]:
    """Each of ``--modes`` once, in order, and their table; returns the outcomes, with the figures
    the table printed (``after_of_ideal``, ``ratio``: the fixed sweep's wall time over this one's)."""
    envs_start = (args.ray_cpus - args.trials * args.learner_cpus) / args.worker_cpus
    outcomes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as storage:
        for mode in args.modes:
            print(f"running {mode} (load {os.getloadavg()[0]:.1f}) ...", flush=True)
            fixed = next((o for o in outcomes if o["mode"] == "fixed"), None)
            outcomes.append(run_sweep(mode, args, configs, storage, stops=fixed["stops"] if fixed else None))
    print(f"\n{'sweep':>8} {'wall s':>7} {'env steps':>10} {'steps/s':>8} {'of ideal':>8} {'after rung s':>12} "
          f"{'steps/s':>8} {'of ideal':>8}  survivors' most actors; promoted")
    for o in outcomes:
        rate = o["env_steps"] / o["wall_s"]
        ideal_sweep = ideal_steps(args, o["lives"], o["start"], o["end"], mean_step) / (o["end"] - o["start"])
        after_s = o["end"] - o["after"]
        rate_after = o["steps_after"] / max(after_s, 1e-9)
        ideal_after = ideal_steps(args, o["lives"], o["after"], o["end"], mean_step) / max(after_s, 1e-9)
        # nan when nothing ran after the rung (the last trial reached it with its last result)
        o["after_of_ideal"] = rate_after / ideal_after if ideal_after > 0 else math.nan
        print(f"{o['mode']:>8} {o['wall_s']:7.1f} {o['env_steps']:10,} {rate:8.0f} {rate / ideal_sweep:8.1%} "
              f"{after_s:12.1f} {rate_after:8.0f} {o['after_of_ideal']:8.1%}  {o['workers_at_end']}; "
              f"{o['promoted']}" + (f"  NOT TERMINATED: {o['bad']}" if o["bad"] else ""))
    for o in outcomes:
        print(f"{o['mode']:>8} first rung, in arrival order (trial: seconds into the sweep, return; * promoted): "
              + ", ".join(f"{i}: {when:.1f} s, {score:.1f}{'*' if i in o['promoted'] else ''}"
                          for when, i, score in o["arrivals"]))
    print(f"ideal: at each moment the envs the CPUs hold beside the learners of the trials alive ({envs_start:.0f} "
          f"with all {args.trials}), {mean_step * 1e3:.2f} ms a step; 'after rung': from the last trial's first-rung result")
    fixed = next((o for o in outcomes if o["mode"] == "fixed"), None)
    for o in outcomes:
        if fixed is None or o is fixed:
            continue
        o["ratio"] = fixed["wall_s"] / o["wall_s"]
        o["same"] = fixed["promoted"] == o["promoted"]
        print(f"{o['mode']} ends {o['ratio']:.2f}x sooner than fixed; "
              f"{'the same trials promoted' if o['same'] else 'DIFFERENT trials promoted'} "
              f"({fixed['promoted']} / {o['promoted']})")
    return outcomes


def summarize(runs: list[list[dict[str, Any]]]) -> None:
    """Per mode over the repeats: the median [min-max] of the after-rung fraction of the ideal and
    of the wall-time ratio against the fixed sweep, and how often the same trials were promoted."""
    print(f"\nover {len(runs)} repeats: median [min-max]")
    for mode in [o["mode"] for o in runs[0]]:
        got = [o for outcomes in runs for o in outcomes if o["mode"] == mode]
        after = sorted(o["after_of_ideal"] for o in got if not math.isnan(o["after_of_ideal"])) or [math.nan]
        line = f"{mode:>8}: after the first rung {statistics.median(after):.1%} [{after[0]:.1%}-{after[-1]:.1%}] of the ideal"
        if "ratio" in got[0]:
            ratios = sorted(o["ratio"] for o in got)
            line += (f"; ends {statistics.median(ratios):.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}] sooner than fixed; "
                     f"the same trials promoted in {sum(o['same'] for o in got)} of {len(got)}")
        print(line)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    configs = trial_configs(args)
    from algorithms.envs.builtin import measure_mean_step

    env_config = {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob}
    mean_step = measure_mean_step(env_config)
    load = os.getloadavg()[0]
    print(f"{args.trials} PPO trials x {args.envs} envs at start, {args.env_threads} per rollout actor"
          f"{' (env threads)' if args.env_threads > 1 else ''}; Ray told {args.ray_cpus:g} CPUs "
          f"(learner {args.learner_cpus:g}, actor {args.worker_cpus * args.env_threads:.4g}); ASHA on env_steps_total: grace {args.grace}, "
          f"reduction factor {args.rf:g}, max_t {args.max_t}; batch {args.batch}; SlowCartPole {args.fast_ms:g} ms, "
          f"{args.slow_ms:g} ms with p={args.slow_prob:g}: mean step {mean_step * 1e3:.2f} ms measured; "
          f"{os.cpu_count()} cores here, 1-minute load {load:.1f}")
    runs = []
    for repeat in range(args.repeat):
        if args.repeat > 1:
            print(f"\n== repeat {repeat + 1} of {args.repeat}", flush=True)
        runs.append(run_modes(args, configs, mean_step))
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"args": vars(args), "mean_step_s": mean_step,
                       "runs": [[{**o, "stops": [[*k, v] for k, v in o["stops"].items()]} for o in outcomes]
                                for outcomes in runs]}, f)
    if args.repeat > 1:
        summarize(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
