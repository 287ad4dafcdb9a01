"""Engine overhead: trials of a trainable that does no work and reports 10 times, FIFO.

Prints trials/s and results/s for this project (every result stored in SQLite, and exported live to
TensorBoard's HParams dashboard as ``tune.run`` does by default; also with ``tensorboard=False``,
to show what the export costs), next to Optuna
(in-memory and SQLite storage) and, when ``ray.tune`` is importable (``pip install -e .[bench]``),
Ray Tune with its defaults and with ``reuse_actors=True``; all measured in this one run, on one
Ray instance started beforehand (engine start is not counted for anyone).

    python benchmarks/overhead.py                 # 200 trials for us and Optuna, 40 for Ray Tune
    python benchmarks/overhead.py --trials 50 --peer-trials 10
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Callable

import ray

REPORTS = 10


def noop_function(config):
    from tuner import tune

    for i in range(REPORTS):
        tune.report({"score": config["x"] * i})


STEADY: list[float] = []
#: Driver CPU seconds of each of our sweeps, by tensorboard on/off: the export's cost, free of the
#: noise that other processes on the machine put into wall times.
DRIVER_CPU: dict[bool, list[float]] = {True: [], False: []}


def run_ours(trials: int, storage: str, tensorboard: bool = True) -> tuple[float, int]:
    """Our sweep; also records the steady-state trials/s (first to last stored result) of the
    default configuration (TensorBoard export on)."""
    from tuner import tune

    start, cpu = time.perf_counter(), time.process_time()
    analysis = tune.run(
        noop_function,
        config={"x": tune.uniform(0, 1)},
        num_samples=trials,
        metric="score",
        mode="max",
        storage_path=storage,
        name=f"overhead_{time.time_ns()}",
        verbose=0,
        tensorboard=tensorboard,
    )
    elapsed = time.perf_counter() - start
    DRIVER_CPU[tensorboard].append(time.process_time() - cpu)
    frame = analysis.results_df
    results = len(frame)
    if results != trials * REPORTS:
        raise SystemExit(f"expected {trials * REPORTS} stored results, found {results}")
    span = frame["timestamp"].max() - frame["timestamp"].min()
    if tensorboard:
        STEADY.append(trials / span if span > 0 else float("inf"))
    return elapsed, results


def ray_actor_start_floor(n: int = 2) -> float:
    """Seconds for Ray alone to bring up n one-CPU placement groups with an actor in each."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote
    class Probe:
        def ping(self) -> int:
            return 1

    start = time.perf_counter()
    groups = [placement_group([{"CPU": 1}]) for _ in range(n)]
    actors = [
        Probe.options(num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(g, 0)).remote()
        for g in groups
    ]
    ray.get([a.ping.remote() for a in actors])
    elapsed = time.perf_counter() - start
    for actor, group in zip(actors, groups):
        ray.kill(actor)
        remove_placement_group(group)
    return elapsed


def run_optuna(trials: int, storage: str | None) -> tuple[float, int]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        for i in range(REPORTS):
            trial.report(x * i, i)
        return x * (REPORTS - 1)

    start = time.perf_counter()
    study = optuna.create_study(direction="maximize", storage=storage, sampler=optuna.samplers.RandomSampler(0))
    study.optimize(objective, n_trials=trials)
    return time.perf_counter() - start, trials * REPORTS


def raytune_function(config):
    from ray import tune as rtune

    for i in range(REPORTS):
        rtune.report({"score": config["x"] * i})


def run_raytune(trials: int, storage: str, reuse_actors: bool) -> tuple[float, int]:
    from ray import tune as rtune

    start = time.perf_counter()
    tuner = rtune.Tuner(
        raytune_function,
        param_space={"x": rtune.uniform(0, 1)},
        tune_config=rtune.TuneConfig(num_samples=trials, metric="score", mode="max", reuse_actors=reuse_actors),
        run_config=rtune.RunConfig(storage_path=storage, name=f"rt_{time.time_ns()}", verbose=0),
    )
    grid = tuner.fit()
    return time.perf_counter() - start, sum(len(r.metrics_dataframe) for r in grid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200, help="trials for us and Optuna (default 200)")
    parser.add_argument("--peer-trials", type=int, default=40, help="trials for Ray Tune (about 1 trial/s)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of ours; the best is shown")
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore")
    logging.getLogger("ray").setLevel(logging.ERROR)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    ray.init(include_dashboard=False, logging_level=logging.ERROR)
    tmp = tempfile.mkdtemp(prefix="tuner_overhead_")
    rows: list[tuple[str, int, float, int]] = []

    def measure(label: str, trials: int, fn: Callable[[], tuple[float, int]]) -> None:
        print(f"running {label} ...", file=sys.stderr, flush=True)
        elapsed, results = fn()
        rows.append((label, trials, elapsed, results))

    ours_label, off_label = "tuner, SQLite + TensorBoard", "tuner, SQLite, tensorboard=False"
    run_ours(10, tmp)  # warm-up: the first sweep of a process pays its imports (not counted)
    STEADY.clear()
    DRIVER_CPU[True].clear()
    for _ in range(args.repeat):  # interleaved, so that both see the same machine
        measure(ours_label, args.trials, lambda: run_ours(args.trials, tmp))
        measure(off_label, args.trials, lambda: run_ours(args.trials, tmp, tensorboard=False))
    ours = min(r[2] for r in rows if r[0] == ours_label) / args.trials
    off = min(r[2] for r in rows if r[0] == off_label) / args.trials
    measure("optuna, in-memory", args.trials, lambda: run_optuna(args.trials, None))
    measure("optuna, SQLite", args.trials, lambda: run_optuna(args.trials, f"sqlite:///{tmp}/optuna.db"))
    try:
        importlib.import_module("ray.tune")
    except ImportError:
        print("ray.tune is not installed: skipping Ray Tune (pip install -e '.[bench]')")
    else:
        measure("ray tune, defaults", args.peer_trials, lambda: run_raytune(args.peer_trials, tmp, False))
        measure("ray tune, reuse_actors=True", args.peer_trials, lambda: run_raytune(args.peer_trials, tmp, True))

    floor = ray_actor_start_floor(int(ray.cluster_resources().get("CPU", 1)))
    print(f"\n{REPORTS} results per trial, {os.cpu_count()} CPUs, Ray {ray.__version__}")
    print(f"ours, steady state (first to last stored result): {max(STEADY):.0f} trials/s; "
          f"Ray alone needs {floor:.2f} s to start one actor per CPU in placement groups, "
          f"paid once per sweep by every Ray-based engine")
    cpu_on, cpu_off = (statistics.median(DRIVER_CPU[k]) for k in (True, False))
    print(f"TensorBoard HParams export: {1 / ours:.1f} trials/s with it, {1 / off:.1f} without "
          f"({(ours / off - 1) * 100:+.1f}% time per trial; best of {args.repeat} runs each); "
          f"driver CPU per trial (median) {cpu_on / args.trials * 1e3:.2f} ms with it, "
          f"{cpu_off / args.trials * 1e3:.2f} ms without ({(cpu_on / cpu_off - 1) * 100:+.1f}%)")
    print(f"{'system':34} {'trials':>6} {'seconds':>8} {'trials/s':>9} {'results/s':>10} {'ours is x faster':>17}")
    for label, trials, elapsed, results in rows:
        speedup = (elapsed / trials) / ours
        print(f"{label:34} {trials:6d} {elapsed:8.2f} {trials / elapsed:9.1f} {results / elapsed:10.0f} {speedup:17.2f}")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
