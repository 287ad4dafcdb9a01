"""PB2 against PBT: a population of 4 PPO trials over ``lr`` and ``clip_param`` on CartPole-v1.

Each seed of the sweep runs two sweeps with ``tune.run("PPO", ...)``, one with PBT, one with
PB2, with the same work: the same 4 initial configs (``lr`` log-uniform in [1e-4, 4e-4] and
``clip_param`` uniform in [0.05, 0.15], drawn from the sweep's seed: slow learners, so that what
the scheduler picks matters), the same trial seeds, the 4 trials running at once (half a CPU's
learner each, sampling in the learner's process), the same budget of ``--budget`` env steps per
trial (``stop={"env_steps_total": budget}``), perturbation every ``--interval`` env steps
(``time_attr="env_steps_total"``), quantile 0.25, scheduler seed = sweep seed, asynchronous (Ray
Tune's default) or, with ``--synch``, synchronous (each round ranks the whole population at once,
so each round's bottom trial exploits the top one; asynchronously, with four trials running at
once, a trial often reaches its point while the top trial is not yet checkpointed at its own,
and the exploit waits for a later round). The two search
spaces are the same box: PB2's ``hyperparam_bounds`` ``lr`` [1e-4, 5e-3] and ``clip_param``
[0.05, 0.5]; PBT's ``hyperparam_mutations`` ``tune.loguniform(1e-4, 5e-3)`` and
``tune.uniform(0.05, 0.5)`` (perturbed by 0.8 / 1.2, resampled with probability 0.25, its
defaults). PBT and PB2 alternate which goes first from seed to seed, so that load from other
processes hits each alike.

Printed: per seed, each sweep's best final ``episode_return_mean`` (the best trial's last result:
the mean return of its last 100 episodes), its exploits and wall time; then the medians side by
side and the PB2 / PBT ratio of the medians; the machine's load average during each sweep.

    python benchmarks/pb2_cartpole.py                      # seeds 0,1,2: about ten minutes on 2 cores
    python benchmarks/pb2_cartpole.py --synch --budget 65536
    python benchmarks/pb2_cartpole.py --seeds 0 --budget 16384 --interval 4096   # a quick look
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

POPULATION = 4
LR_BOUNDS = (1e-4, 5e-3)
CLIP_BOUNDS = (0.05, 0.5)


def initial_configs(seed: int) -> dict[int, dict[str, float]]:
    """Trial seed -> its initial lr and clip_param, the same for both schedulers."""
    rng = random.Random(seed)
    return {
        1000 * seed + i: {"lr": 10 ** rng.uniform(math.log10(1e-4), math.log10(4e-4)), "clip_param": rng.uniform(0.05, 0.15)}
        for i in range(POPULATION)
    }


def scheduler(kind: str, seed: int, interval: int, synch: bool):
    from schedulers import PB2, PopulationBasedTraining
    from tuner import tune

    common = dict(time_attr="env_steps_total", perturbation_interval=interval, quantile_fraction=0.25, synch=synch,
                  seed=seed)
    if kind == "PB2":
        return PB2(**common, hyperparam_bounds={"lr": list(LR_BOUNDS), "clip_param": list(CLIP_BOUNDS)})
    return PopulationBasedTraining(
        **common, hyperparam_mutations={"lr": tune.loguniform(*LR_BOUNDS), "clip_param": tune.uniform(*CLIP_BOUNDS)}
    )


def run_sweep(kind: str, seed: int, args: argparse.Namespace, storage: str) -> dict:
    from tuner import tune

    inits = initial_configs(seed)
    config = {
        "env": "CartPole-v1",
        "seed": tune.grid_search(sorted(inits)),
        "lr": tune.sample_from(lambda spec: inits[spec.config["seed"]]["lr"]),
        "clip_param": tune.sample_from(lambda spec: inits[spec.config["seed"]]["clip_param"]),
        "num_cpus_for_learner": 2.0 / POPULATION,
    }
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    analysis = tune.run(
        "PPO", config=config, scheduler=scheduler(kind, seed, args.interval, args.synch), metric="episode_return_mean",
        mode="max", stop={"env_steps_total": args.budget}, max_concurrent_trials=POPULATION,
        storage_path=storage, name=f"{kind.lower()}_seed{seed}", verbose=0,
    )
    wall = time.perf_counter() - start
    finals = [t.last_result["episode_return_mean"] for t in analysis.trials]
    steps = [t.last_result["env_steps_total"] for t in analysis.trials]
    return {"best": max(finals), "finals": finals, "steps": steps, "exploits": len(analysis.exploits),
            "wall": wall, "load": (load_before + os.getloadavg()[0]) / 2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the sweep, comma-separated")
    parser.add_argument("--budget", type=int, default=49_152, help="env steps per trial (24 PPO iterations of 2048)")
    parser.add_argument("--interval", type=int, default=8_192, help="perturbation interval, in env steps")
    parser.add_argument("--synch", action="store_true", help="synchronous PBT and PB2")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: comma-separated ints, got {args.seeds!r}")
    if args.budget < 1 or args.interval < 1:
        parser.error(f"--budget and --interval: must be >= 1, got {args.budget} and {args.interval}")
    warnings.filterwarnings("ignore")

    import ray

    from benchmarks.peers.common import ray_init

    ray_init(2)
    logging.getLogger("tuner").setLevel(logging.WARNING)
    print(f"{POPULATION} PPO trials on CartPole-v1 per sweep, {args.budget:,} env steps each, perturbation every "
          f"{args.interval:,} env steps, {'synchronous' if args.synch else 'asynchronous'}; seeds {seeds}\n")
    rows: dict[str, list[dict]] = {"PBT": [], "PB2": []}
    with tempfile.TemporaryDirectory() as storage:
        for i, seed in enumerate(seeds):
            for kind in (("PBT", "PB2") if i % 2 == 0 else ("PB2", "PBT")):
                row = run_sweep(kind, seed, args, storage)
                rows[kind].append(row)
                finals = ", ".join(f"{f:.0f}" for f in row["finals"])
                print(f"seed {seed} {kind}: best final {row['best']:6.1f} (trials: {finals}), {row['exploits']} exploits, "
                      f"{row['wall']:.0f} s, load {row['load']:.1f}", flush=True)
    ray.shutdown()

    pbt = statistics.median(r["best"] for r in rows["PBT"])
    pb2 = statistics.median(r["best"] for r in rows["PB2"])
    print(f"\n{'':<5} {'best final episode_return_mean per seed':<42} {'median':>7} {'sweep s (median)':>17}")
    for kind, value in (("PBT", pbt), ("PB2", pb2)):
        per_seed = ", ".join(f"{r['best']:.1f}" for r in rows[kind])
        wall = statistics.median(r["wall"] for r in rows[kind])
        print(f"{kind:<5} {per_seed:<42} {value:7.1f} {wall:17.0f}")
    print(f"PB2 / PBT (medians): {pb2 / pbt:.2f}")
    loads = [r["load"] for kind in rows for r in rows[kind]]
    print(f"load average during the sweeps: {min(loads):.1f}-{max(loads):.1f} (2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
