"""One PPO pack's learner alone in this process (issue 48): the numpy learner of the built-in MLPs
(``algorithms/ppo/population_mlp.py``, what a pack on a CPU runs) against its torch twin
(``algorithms/ppo/population_mlp_torch.py``, what a pack on a GPU runs) on the CPU, and on a CUDA
device when torch sees one: whether the numpy learner is still needed, and what a GPU buys.

The same members for every system (``--members`` configs of lr log-uniform in [1e-4, 3e-3], member
``m`` on seed ``m``; PPO's defaults otherwise: CartPole-v1, 8 envs, batches of 2,048, minibatches
of 512, 10 epochs, separate 64x64 tanh networks), one warm-up iteration, then ``--iterations``
timed; the systems take turns ``--repeat`` times. Torch and BLAS get ``--threads`` threads.
Printed: seconds per iteration (median of the repeats) and each system's ratio to numpy's, and the
members' mean return after the last iteration (the twins start from the same weights and draw the
same actions: equal returns, up to float rounding).

    python benchmarks/pack_learner.py                         # 16 members, 3 iterations, 2 repeats
    python benchmarks/pack_learner.py --members 2 --iterations 1 --repeat 1      # the smoke test
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


def build(system: str, members: int) -> Any:
    """A PPO population of ``members`` whose networks are ``system``'s: "numpy", "torch-cpu" or
    "torch-cuda"."""
    import numpy as np

    from algorithms.optim.population_adam import PopulationAdam
    from algorithms.ppo.population import PopulationPPO
    from algorithms.ppo.population_mlp_torch import builtin_stack

    rng = np.random.default_rng(0)
    lrs = np.exp(rng.uniform(np.log(1e-4), np.log(3e-3), members))
    pack = PopulationPPO([{"env": "CartPole-v1", "seed": m, "lr": float(lr)} for m, lr in enumerate(lrs)])
    if system != "numpy":
        device = system.split("-")[1]
        pack.device = device
        pack.nets = builtin_stack(pack.nets.sizes, list(range(members)), device=device)
        pack.grad = pack.nets.gradient_buffer()
        pack.adam = PopulationAdam(pack.P, pack.grad.shape[1], device)
    return pack


def time_system(system: str, members: int, iterations: int) -> tuple[float, float]:
    """(seconds per iteration, the members' mean return after the last) of one fresh pack."""
    import numpy as np

    pack = build(system, members)
    try:
        pack.train()  # warm-up: allocations, torch's first calls
        start = time.perf_counter()
        for _ in range(iterations):
            results = pack.train()
        seconds = (time.perf_counter() - start) / iterations
    finally:
        pack.stop()
    return seconds, float(np.mean([r["episode_return_mean"] for r in results]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=16)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    for flag in ("members", "iterations", "repeat", "threads"):
        positive(p, f"--{flag}", getattr(args, flag))

    with compute_threads(args.threads):
        compare(args.members, args.iterations, args.repeat, args.threads)


def compare(members: int, iterations: int, repeat: int, threads: int) -> None:
    """Time every system in turns and print a row each (see the module docstring)."""
    import torch

    systems = ["numpy", "torch-cpu"] + (["torch-cuda"] if torch.cuda.is_available() else [])
    print(f"PPO pack of {members} on CartPole-v1 (8 envs, 2,048 env steps an iteration a member, 10 epochs of "
          f"4 minibatches), {threads} thread(s); {iterations} iteration(s) timed after one, "
          f"{repeat} repeat(s)" + ("" if "torch-cuda" in systems else "; no CUDA device: its row is left out"))
    seconds: dict[str, list[float]] = {s: [] for s in systems}
    returns: dict[str, float] = {}
    for _ in range(repeat):
        for system in systems:
            took, returns[system] = time_system(system, members, iterations)
            seconds[system].append(took)
    base = statistics.median(seconds["numpy"])
    for system in systems:
        median = statistics.median(seconds[system])
        spread = f"[{min(seconds[system]):.2f}-{max(seconds[system]):.2f}]"
        print(f"  {system:10s} {median:6.2f} s an iteration {spread:>13s}  {median / base:5.2f}x numpy's  "
              f"mean return {returns[system]:6.1f}")

if __name__ == "__main__":
    main()
