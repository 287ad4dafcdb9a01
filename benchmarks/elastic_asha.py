"""ASHA over PPO trials on the slow simulator, with and without elastic rollout actors.

The work, the same for both sweeps: ``--trials`` PPO trials (learning rates x seeds, drawn once
from ``--seed``), all at once, each starting with ``--envs`` rollout actors of one env
(``tuner/SlowCartPole-v1``: 3 ms steps, 100 ms with p=0.03), streaming (``sample_async``), on a
Ray told ``--ray-cpus`` CPUs, so that the trials fill it exactly (learner ``--learner-cpus``, each
actor (ray_cpus / trials - learner) / envs). ASHA (Ray Tune's stopping rule) on ``env_steps_total``:
grace period ``--grace``, reduction factor ``--rf``, ``max_t`` ``--max-t``: the first rung stops
most trials.

* fixed: ``ASHAScheduler`` alone: a survivor samples with the actors it started with, and the
  stopped trials' CPUs sit idle.
* elastic: ``ResourceChangingScheduler(ASHAScheduler(...), DistributeResources(add_bundles=True))``:
  the stopped trials' CPUs are shared among the survivors as more rollout actors, in place.

Printed per sweep: its wall time (``tune.run`` alone: Ray's start is outside), env steps, env
steps/s over the sweep and after the first rung (from the moment the last trial crossed or was
stopped at it to the end), each against the ideal for the CPUs told to Ray (the envs those CPUs
hold beside the learners of the trials alive, over the simulator's mean step measured here), the
rollout actors the survivors ended with, and which trials passed the first rung; then the ratio of
the wall times and whether the same trials were promoted. ASHA's decisions depend on the order
results arrive, and asynchronous sampling is not bit-for-bit repeatable, so the promoted trials
may differ between the sweeps; the script says so when they do.

    python benchmarks/elastic_asha.py                       # 8 trials x 8 envs on 16 CPUs told to Ray
    python benchmarks/elastic_asha.py --trials 4 --envs 2 --ray-cpus 4 --max-t 4096   # small
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from benchmarks.peers.common import ray_init  # noqa: E402

MODES = ("fixed", "elastic")
LRS = (1e-4, 3e-4, 1e-3, 2.5e-3)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--envs", type=int, default=8, help="rollout actors (of one env) per trial at its start")
    p.add_argument("--ray-cpus", type=float, default=16.0)
    p.add_argument("--learner-cpus", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=1024, help="env steps per PPO iteration")
    p.add_argument("--grace", type=int, default=2048, help="ASHA's grace period, in env steps")
    p.add_argument("--rf", type=float, default=4.0, help="ASHA's reduction factor")
    p.add_argument("--max-t", type=int, default=16384, help="ASHA's max_t and each trial's stop, in env steps")
    p.add_argument("--fast-ms", type=float, default=3.0)
    p.add_argument("--slow-ms", type=float, default=100.0)
    p.add_argument("--slow-prob", type=float, default=0.03)
    p.add_argument("--modes", default="fixed,elastic")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.trials % len(LRS):
        p.error(f"--trials: a multiple of {len(LRS)} (the learning rates x seeds), got {args.trials}")
    for name in ("trials", "envs", "batch", "grace", "max_t"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    if args.rf <= 1:
        p.error(f"--rf: must be > 1, got {args.rf}")
    if args.max_t <= args.grace:
        p.error(f"--max-t: must be above --grace ({args.grace}), got {args.max_t}")
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes: a comma-separated list of {list(MODES)}, got {args.modes!r}")
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


def run_sweep(mode: str, args: argparse.Namespace, configs: list[dict[str, Any]], storage: str) -> dict[str, Any]:
    import ray
    from schedulers import ASHAScheduler, DistributeResources, ResourceChangingScheduler
    from tuner import tune

    ray_init(args.ray_cpus)
    asha = ASHAScheduler(time_attr="env_steps_total", grace_period=args.grace, reduction_factor=args.rf,
                         max_t=args.max_t)
    scheduler = asha if mode == "fixed" else ResourceChangingScheduler(asha, DistributeResources(add_bundles=True))
    index = {(c["lr"], c["seed"]): i for i, c in enumerate(configs)}
    start = time.perf_counter()
    analysis = tune.run(
        "PPO",
        config={
            "env": "tuner/SlowCartPole-v1",
            "env_config": {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob},
            "num_workers": args.envs, "num_envs_per_worker": 1, "sample_async": True,
            "num_cpus_per_worker": args.worker_cpus, "num_cpus_for_learner": args.learner_cpus,
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
    for df in frames.values():
        for _, row in df.iterrows():
            end = float(row["timestamp"])
            rows.append((end - float(row["time_this_iter_s"]), end, int(row["env_steps_this_iter"])))
        crossed = df[df["env_steps_total"] >= args.grace]
        rung_at.append(float(crossed["timestamp"].iloc[0]) if len(crossed) else float(df["timestamp"].iloc[-1]))
    sweep_end = max(end for _, end, _ in rows)
    sweep_start = min(began for began, _, _ in rows)
    after = max(rung_at)
    steps_after = sum(n * max(0.0, min(end, sweep_end) - max(began, after)) / max(end - began, 1e-9)
                      for began, end, n in rows)
    # promoted: went on past its first result at or over the rung (a stopped trial's is its last)
    passed = {tid for tid, df in frames.items() if int((df["env_steps_total"] >= args.grace).sum()) > 1}
    promoted = sorted(index[configs_of[tid]] for tid in passed)
    survivors_workers = {index[configs_of[tid]]: int(frames[tid]["num_workers"].max()) for tid in passed}
    ray.shutdown()
    return {
        "mode": mode, "wall_s": wall, "env_steps": int(sum(df["env_steps_total"].iloc[-1] for df in frames.values())),
        "sampling_s": sweep_end - sweep_start, "after_s": sweep_end - after, "steps_after": steps_after,
        "promoted": promoted, "workers_at_end": survivors_workers, "bad": [t.status for t in analysis.trials
                                                                            if t.status != "TERMINATED"],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    configs = trial_configs(args)
    from algorithms.shared.envs import measure_mean_step

    env_config = {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob}
    mean_step = measure_mean_step(env_config)
    load = os.getloadavg()[0]
    print(f"{args.trials} PPO trials x {args.envs} rollout actors of 1 env at start; Ray told {args.ray_cpus:g} CPUs "
          f"(learner {args.learner_cpus:g}, actor {args.worker_cpus:.4g}); ASHA on env_steps_total: grace {args.grace}, "
          f"reduction factor {args.rf:g}, max_t {args.max_t}; batch {args.batch}; SlowCartPole {args.fast_ms:g} ms, "
          f"{args.slow_ms:g} ms with p={args.slow_prob:g}: mean step {mean_step * 1e3:.2f} ms measured; "
          f"{os.cpu_count()} cores here, 1-minute load {load:.1f}")
    envs_start = (args.ray_cpus - args.trials * args.learner_cpus) / args.worker_cpus
    outcomes = []
    with tempfile.TemporaryDirectory() as storage:
        for mode in args.modes:
            print(f"running {mode} (load {os.getloadavg()[0]:.1f}) ...", flush=True)
            outcomes.append(run_sweep(mode, args, configs, storage))
    print(f"\n{'sweep':>8} {'wall s':>7} {'env steps':>10} {'steps/s':>8} {'of ideal':>8} {'after rung s':>12} "
          f"{'steps/s':>8} {'of ideal':>8}  survivors' most actors; promoted")
    for o in outcomes:
        survivors = len(o["promoted"])
        ideal_sweep = envs_start / mean_step
        envs_after = (args.ray_cpus - survivors * args.learner_cpus) / args.worker_cpus
        ideal_after = envs_after / mean_step
        rate = o["env_steps"] / o["wall_s"]
        rate_after = o["steps_after"] / max(o["after_s"], 1e-9)
        print(f"{o['mode']:>8} {o['wall_s']:7.1f} {o['env_steps']:10,} {rate:8.0f} {rate / ideal_sweep:8.1%} "
              f"{o['after_s']:12.1f} {rate_after:8.0f} {rate_after / ideal_after:8.1%}  {o['workers_at_end']}; "
              f"{o['promoted']}" + (f"  NOT TERMINATED: {o['bad']}" if o["bad"] else ""))
    print(f"ideal: {envs_start:.0f} envs over the sweep (all trials' actors), {mean_step * 1e3:.2f} ms a step; after the "
          f"first rung the envs the CPUs hold beside the survivors' learners")
    if len(outcomes) == 2:
        fixed, elastic = outcomes
        same = fixed["promoted"] == elastic["promoted"]
        print(f"elastic ends {fixed['wall_s'] / elastic['wall_s']:.2f}x sooner than fixed; "
              f"{'the same trials promoted' if same else 'DIFFERENT trials promoted'} "
              f"({fixed['promoted']} / {elastic['promoted']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
