"""Engine overhead: trials of a trainable that does no work and reports 10 times, FIFO.

The same work for every system: ``--trials`` trials (one count for all), each reporting 10 results;
one uncounted warm-up sweep of ``--warmup`` trials per system first (a process's first sweep pays
its imports, for everyone); every run starts when all of the cluster's CPUs are free (the actors
of the run before may take a moment to go); then ``--repeat`` rounds, each running every system once, the first
system of a round rotating, so a drift in the machine's load does not fall on one system; each
row is the median of its rounds, with [min-max]. All on one Ray instance started beforehand
(engine start is counted for nobody).

* tuner: ``tune.run`` with every result stored in SQLite, exported live to TensorBoard's HParams
  dashboard as by default, and again with ``tensorboard=False`` (what the export costs; also as
  driver CPU per trial, free of the noise other processes put into wall times);
* Optuna: ``study.optimize`` with a seeded random sampler, in-memory and SQLite storage;
* Ray Tune (when ``ray.tune`` is importable: ``pip install -e .[bench]``): ``Tuner.fit`` with its
  defaults and with ``reuse_actors=True``.

Printed per row: seconds per sweep, trials/s, results/s, and the sweep's time over ours (the
default, TensorBoard on) in the same round; beside the table, what Ray alone needs to start one actor per CPU in placement groups
(every Ray-based engine pays it once per sweep).

    python benchmarks/overhead.py                          # 100 trials, 3 rounds: a few minutes
    python benchmarks/overhead.py --trials 20 --repeat 1   # quick
    python benchmarks/overhead.py --systems tuner          # ours alone (the ratios need the first row)
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


#: Driver CPU seconds of each of our sweeps, by tensorboard on/off: the export's cost, free of the
#: noise that other processes on the machine put into wall times.
DRIVER_CPU: dict[bool, list[float]] = {True: [], False: []}


def run_ours(trials: int, storage: str, tensorboard: bool = True) -> tuple[float, int]:
    """Our sweep: (seconds, results stored); its driver CPU goes to :data:`DRIVER_CPU`."""
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


SYSTEMS = ("tuner, SQLite + TensorBoard", "tuner, SQLite, tensorboard=False", "optuna, in-memory",
           "optuna, SQLite", "ray tune, defaults", "ray tune, reuse_actors=True")


def _runners(tmp: str) -> dict[str, Callable[[int], tuple[float, int]]]:
    """Each system's sweep of n trials: (seconds, results)."""
    runners: dict[str, Callable[[int], tuple[float, int]]] = {
        SYSTEMS[0]: lambda n: run_ours(n, tmp),
        SYSTEMS[1]: lambda n: run_ours(n, tmp, tensorboard=False),
        SYSTEMS[2]: lambda n: run_optuna(n, None),
        SYSTEMS[3]: lambda n: run_optuna(n, f"sqlite:///{tmp}/optuna_{time.time_ns()}.db"),
    }
    try:
        importlib.import_module("ray.tune")
    except ImportError:
        print("ray.tune is not installed: skipping Ray Tune (pip install -e '.[bench]')")
    else:
        runners[SYSTEMS[4]] = lambda n: run_raytune(n, tmp, False)
        runners[SYSTEMS[5]] = lambda n: run_raytune(n, tmp, True)
    return runners


def wait_for_free_cpus(timeout_s: float = 60.0) -> None:
    """Wait until every CPU of the cluster is free again: a system's actors from the run before
    (Ray Tune's are killed asynchronously) would otherwise hold CPUs the next run waits for."""
    total = ray.cluster_resources().get("CPU", 0.0)
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0.0) < total and time.monotonic() < deadline:
        time.sleep(0.05)


def _spread(values: list[float], fmt: str) -> str:
    median = statistics.median(values)
    if len(values) == 1:
        return format(median, fmt)
    return f"{format(median, fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100, help="trials per sweep, every system (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="trials of each system's uncounted first sweep (default 5)")
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds; rows are medians (default 3)")
    parser.add_argument("--systems", default=None,
                        help="comma-separated substrings of the rows to run, e.g. 'tuner' (default: every row)")
    args = parser.parse_args(argv)
    for name in ("trials", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be at least 0, got {args.warmup}")

    warnings.filterwarnings("ignore")
    logging.getLogger("ray").setLevel(logging.ERROR)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    from benchmarks.loopback import loopback_only

    loopback_only()
    ray.init(include_dashboard=False, logging_level=logging.ERROR)
    tmp = tempfile.mkdtemp(prefix="tuner_overhead_")
    runners = _runners(tmp)
    if args.systems:
        wanted = [w.strip() for w in args.systems.split(",") if w.strip()]
        runners = {k: v for k, v in runners.items() if any(w in k for w in wanted)}
        if SYSTEMS[0] not in runners:
            parser.error(f"--systems must keep {SYSTEMS[0]!r} (the ratios are against it), got {args.systems!r}")
    names = list(runners)
    if args.warmup:
        for name in names:
            print(f"warming up {name} ...", file=sys.stderr, flush=True)
            wait_for_free_cpus()
            runners[name](args.warmup)
    DRIVER_CPU[True].clear()
    DRIVER_CPU[False].clear()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, list[int]] = {name: [] for name in names}
    for round_ in range(args.repeat):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            print(f"round {round_ + 1}/{args.repeat}: {name} ...", file=sys.stderr, flush=True)
            wait_for_free_cpus()
            elapsed, count = runners[name](args.trials)
            seconds[name].append(elapsed)
            results[name].append(count)

    floor = ray_actor_start_floor(int(ray.cluster_resources().get("CPU", 1)))
    print(f"\n{args.trials} trials per sweep, {REPORTS} results per trial, every system; one uncounted warm-up "
          f"sweep of {args.warmup} trials each; medians of {args.repeat} rounds [min-max]; "
          f"{os.cpu_count()} CPUs, Ray {ray.__version__}")
    print(f"Ray alone needs {floor:.2f} s to start one actor per CPU in placement groups, "
          f"paid once per sweep by every Ray-based engine")
    ours = statistics.median(seconds[SYSTEMS[0]])
    off = statistics.median(seconds[SYSTEMS[1]])
    cpu_on, cpu_off = (statistics.median(DRIVER_CPU[k]) for k in (True, False))
    print(f"TensorBoard HParams export: {(ours / off - 1) * 100:+.1f}% wall time per sweep; driver CPU per trial "
          f"{cpu_on / args.trials * 1e3:.2f} ms with it, {cpu_off / args.trials * 1e3:.2f} ms without (medians)")
    print(f"{'system':34} {'seconds':>22} {'trials/s':>22} {'results/s':>24} {'sweep time / ours':>24}")
    for name in names:
        secs = seconds[name]
        rates = [args.trials / s for s in secs]
        result_rates = [r / s for r, s in zip(results[name], secs)]
        # per round, against ours in the same round: the ratio of two runs that saw the same machine
        ratios = [s / o for s, o in zip(secs, seconds[SYSTEMS[0]])]
        print(f"{name:34} {_spread(secs, '.2f'):>22} {_spread(rates, '.1f'):>22} {_spread(result_rates, '.0f'):>24} "
              f"{_spread(ratios, '.2f'):>24}")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
