"""What a pack's survivors cost (issue 48, item 2: "the pack goes on without it, its compute
shrinks"): a pack of ``--members`` whose scheduler stopped all but ``--learning`` of them (ASHA's
last rung: the survivors run longest) against the same ``--learning`` members in a pack of their
own, in this process, in turns.

The same work for both: the survivors are members ``0 .. learning - 1`` (configs of lr
log-uniform in [1e-4, 3e-3], member ``m`` on seed ``m``; the trainer's pack defaults otherwise),
one warm-up iteration, then ``--iterations`` timed; ``--repeat`` turns; one torch and BLAS
thread. Printed per trainer and env: seconds per survivors' iteration (median of the repeats) and
the ratio of the big pack to the small one (1.00: a stopped member costs nothing). Envs: a
natively vectorised one (CartPole-v1: the pack steps every slot in one call) and one stepped env
by env (Acrobot-v1, as a user's env is).

    python benchmarks/pack_survivors.py                                   # PPO and DQN, 16 members, 1 survivor
    python benchmarks/pack_survivors.py --members 2 --iterations 1 --repeat 1 --trainers PPO   # the smoke test
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import compute_threads, positive  # noqa: E402 - after the path is set

ENVS = ("CartPole-v1", "Acrobot-v1")
TRAINERS = ("PPO", "DQN")


def build(trainer: str, env: str, members: int) -> Any:
    """A pack of ``members`` of ``trainer`` on ``env`` (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(0)
    lrs = np.exp(rng.uniform(np.log(1e-4), np.log(3e-3), members))
    configs = [{"env": env, "seed": m, "lr": float(lr)} for m, lr in enumerate(lrs)]
    if trainer == "PPO":
        from algorithms.ppo.population import PopulationPPO

        return PopulationPPO(configs)
    from algorithms.dqn.population import PopulationDQN

    return PopulationDQN(configs)


def time_pack(trainer: str, env: str, members: int, learning: int, iterations: int) -> float:
    """Seconds per iteration of the first ``learning`` members of a fresh pack of ``members``."""
    pack = build(trainer, env, members)
    survivors = list(range(learning))
    try:
        pack.train(survivors)  # warm-up: allocations, torch's first calls
        start = time.perf_counter()
        for _ in range(iterations):
            pack.train(survivors)
        return (time.perf_counter() - start) / iterations
    finally:
        pack.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=16)
    p.add_argument("--learning", type=int, default=1)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--trainers", default=",".join(TRAINERS), help=f"a comma-separated subset of {TRAINERS}")
    args = p.parse_args(argv)
    for flag in ("members", "learning", "iterations", "repeat"):
        positive(p, f"--{flag}", getattr(args, flag))
    if args.learning > args.members:
        p.error(f"--learning: at most --members ({args.members}), got {args.learning}")
    trainers = [t.strip() for t in args.trainers.split(",") if t.strip()]
    wrong = [t for t in trainers if t not in TRAINERS]
    if wrong or not trainers:
        p.error(f"--trainers: a comma-separated subset of {', '.join(TRAINERS)}, got {args.trainers!r}")

    with compute_threads(1):
        compare(trainers, args.members, args.learning, args.iterations, args.repeat)


def compare(trainers: list[str], members: int, learning: int, iterations: int, repeat: int) -> None:
    """Time both packs in turns for every trainer and env and print a row each."""
    print(f"{learning} of a pack of {members} learning, against a pack of {learning}; one thread; "
          f"{iterations} iteration(s) timed after one, {repeat} repeat(s); seconds per iteration, median [min-max]")
    for trainer in trainers:
        for env in ENVS:
            seconds: dict[int, list[float]] = {members: [], learning: []}
            for _ in range(repeat):
                for size in seconds:
                    seconds[size].append(time_pack(trainer, env, size, learning, iterations))
            big, small = (statistics.median(seconds[size]) for size in (members, learning))
            spans = {size: f"[{min(s):.3f}-{max(s):.3f}]" for size, s in seconds.items()}
            print(f"  {trainer:4s} {env:12s} pack of {members:3d}: {big:7.3f} s {spans[members]:>15s}   "
                  f"pack of {learning:3d}: {small:7.3f} s {spans[learning]:>15s}   {big / small:5.2f}x")


if __name__ == "__main__":
    main()
