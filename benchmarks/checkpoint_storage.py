"""Checkpoints in object storage must not stall learning: the same PPO sweep, checkpointing every
iteration, with its checkpoints on local disk and in an S3 server (SeaweedFS, on this machine), in
one run; then how long a restore takes from each.

The work, the same for both: 2 PPO trials on CartPole-v1 (2 seeds), 2 at once, 16 iterations of
2,048 env steps, a checkpoint after every iteration, 2 kept (the others deleted where they are);
Ray started once, before the first sweep, outside the timings. The sweeps alternate (local, S3,
local, S3, ...) ``--repeat`` times; printed: each sweep's wall time, the median of each storage with
its spread, and their ratio (S3 / local). A restore: the best checkpoint of the last sweep of each
storage loaded as an agent (``algorithms.load_agent``: a download, for S3, then the trainer's
restore), median of ``--restores`` loads after one that is not timed (imports, the first connection).

    python benchmarks/checkpoint_storage.py                 # 3 pairs, several minutes
    python benchmarks/checkpoint_storage.py --repeat 1 --iterations 4   # quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)


def sweep(storage: str, name: str, iterations: int) -> tuple[float, str]:
    """One sweep; (its wall seconds, its best checkpoint)."""
    from tuner import tune

    began = time.perf_counter()
    analysis = tune.run("PPO", config={"env": "CartPole-v1", "seed": tune.grid_search([0, 1]),
                                       "num_cpus_for_learner": 0.5},
                        stop={"training_iteration": iterations}, checkpoint_freq=1, keep_checkpoints_num=2,
                        metric="episode_return_mean", mode="max", storage_path=storage, name=name, verbose=0)
    wall = time.perf_counter() - began
    bad = [t.status for t in analysis.trials if t.status != "TERMINATED"]
    if bad:
        raise RuntimeError(f"sweep {name}: trials did not finish: {bad}")
    best = analysis.get_best_checkpoint().path
    analysis.close()
    return wall, best


def restore_s(checkpoint: str, times: int) -> list[float]:
    from algorithms import load_agent

    load_agent(checkpoint).stop()  # warm-up: imports, the first connection
    took = []
    for _ in range(times):
        began = time.perf_counter()
        load_agent(checkpoint).stop()
        took.append(time.perf_counter() - began)
    return took


def spread(values: list[float], fmt: str = ".1f") -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="pairs of sweeps (default 3)")
    parser.add_argument("--iterations", type=int, default=16, help="iterations per trial (default 16)")
    parser.add_argument("--restores", type=int, default=5, help="agent loads per storage (default 5)")
    args = parser.parse_args(argv)
    for flag in ("repeat", "iterations", "restores"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}: must be >= 1, got {getattr(args, flag)}")
    import ray

    from tests.s3_server import start_s3_server

    work = Path(tempfile.mkdtemp(prefix="checkpoint_storage_"))
    server = start_s3_server(work / "s3")
    os.environ.update(server.env)
    os.environ["TUNER_STORAGE_PATH"] = str(work / "local_runs")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        walls: dict[str, list[float]] = {"local": [], "s3": []}
        best: dict[str, str] = {}
        print(f"2 PPO trials x {args.iterations} iterations of 2,048 env steps, a checkpoint each, 2 kept; "
              f"{args.repeat} pair(s), alternating")
        for i in range(args.repeat):
            for kind, storage in (("local", str(work / "local")), ("s3", server.uri("bench"))):
                wall, best[kind] = sweep(storage, f"{kind}_{i}", args.iterations)
                walls[kind].append(wall)
                print(f"  pair {i + 1} {kind:5} {wall:6.1f} s")
        ratio = [s / loc for s, loc in zip(walls["s3"], walls["local"])]
        print(f"\nsweep wall time: local {spread(walls['local'])} s, s3 {spread(walls['s3'])} s; "
              f"s3/local {spread(ratio, '.3f')} (pair by pair)")
        for kind in ("local", "s3"):
            took = restore_s(best[kind], args.restores)
            print(f"restore ({kind}): load_agent of {best[kind]} {spread([t * 1e3 for t in took], '.0f')} ms")
    finally:
        ray.shutdown()
        server.stop()


if __name__ == "__main__":
    main()
