"""SAC on MuJoCo's HalfCheetah-v5 for a fixed number of env steps: the return and the wall time,
ours next to Stable-Baselines3's with rl-zoo's hyperparameters, in the same run.

rl-zoo's SAC settings for HalfCheetah are SB3's defaults with ``learning_starts=10000``: lr 3e-4
(actor, critics, temperature), a million-transition buffer, batch 256, tau 0.005, gamma 0.99, one
update per env step, the temperature learnt from 1.0 towards -(action dims), twin 256x256 relu
critics, Adam with eps 1e-8, no gradient clipping. Ours runs the same values under our keys
(``benchmarks/off_policy.py``'s ``ours_sac_config``, which maps each of them, with the env and
``learning_starts`` changed), sampling in the learner's process from one env, as SB3 does.

What is compared, per seed (default 0, 1, 2) and as medians:

* the return: the mean return of the last 10 completed training episodes when the run ends (the
  episodes are 1000 steps: at 50k steps that is episodes 41-50), read the same way on both sides
  (ours: ``episode_return_mean`` with ``metrics_num_episodes_for_smoothing=10``; SB3: its Monitor's
  returns); also the mean at each 10k steps, the curve.
* the wall time from before the trainer / model is built to the last step's update, and the env
  steps per second after ``learning_starts`` (the updating part);
* the replay buffer's bytes per transition (ours: ``bytes_per_transition``; SB3: its arrays' bytes
  over its capacity). Both keep HalfCheetah's float64 observations as the env gives them.

Both systems run at once, one per core (``--parallel``, the default on this 2-core machine: each
process has one torch thread; load from anything else hits both alike), or one after the other
(``--no-parallel``: ours seed 0, SB3 seed 0, ours seed 1, ...).

    python benchmarks/sac_halfcheetah.py                       # 50k steps, seeds 0-2: ~35 min on 2 cores
    python benchmarks/sac_halfcheetah.py --steps 20000 --seeds 0
    python benchmarks/sac_halfcheetah.py --quick               # a smoke run of both (no figures to read)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
import warnings
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENV = "HalfCheetah-v5"
WINDOW = 10  # episodes in the reported mean
EPISODE = 1000  # HalfCheetah's time limit: every episode is this long

from benchmarks.off_policy import SAC_ZOO, ours_sac_config  # noqa: E402

#: rl-zoo's SAC HalfCheetah hyperparameters: SB3's defaults (off_policy.py's SAC_ZOO writes them out)
#: with SB3's lr and 10k steps of random actions first.
ZOO: dict[str, Any] = {**SAC_ZOO, "learning_rate": 3e-4, "learning_starts": 10_000}


def ours_config(hp: dict[str, Any], seed: int) -> dict[str, Any]:
    return {**ours_sac_config(hp, 0), "env": ENV, "seed": seed, "num_cpus_for_learner": 1.0,
            "metrics_num_episodes_for_smoothing": WINDOW,
            "min_sample_timesteps_per_iteration": EPISODE}  # a result at each episode's end


def run_ours(seed: int, steps: int, hp: dict[str, Any]) -> dict[str, Any]:
    import torch

    from algorithms import SAC

    torch.set_num_threads(1)
    start = time.perf_counter()
    trainer = SAC(config=ours_config(hp, seed))
    curve: list[tuple[int, float]] = []
    learning_from = None
    try:
        done = 0
        while done < steps:
            result = trainer.train()
            done = result["env_steps_total"]
            curve.append((done, float(result["episode_return_mean"])))
            if learning_from is None and done >= hp["learning_starts"]:
                learning_from = (done, time.perf_counter())
        wall = time.perf_counter() - start
        per_transition = trainer.buffer.bytes_per_transition
        threads = torch.get_num_threads()
    finally:
        trainer.stop()
    return _summary("ours", seed, curve, done, wall, learning_from, per_transition, threads)


def run_sb3(seed: int, steps: int, hp: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    learning_starts = hp["learning_starts"]

    class Curve(BaseCallback):
        """The mean of the last WINDOW Monitor returns at each episode's end, as ours reports it."""

        def __init__(self) -> None:
            super().__init__()
            self.returns: deque = deque(maxlen=WINDOW)
            self.points: list[tuple[int, float]] = []
            self.learning_from: tuple[int, float] | None = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(info["episode"]["r"])
                    self.points.append((self.num_timesteps, float(np.mean(self.returns))))
            if self.learning_from is None and self.num_timesteps >= learning_starts:
                self.learning_from = (self.num_timesteps, time.perf_counter())
            return True

    torch.set_num_threads(1)
    start = time.perf_counter()
    env = make_vec_env(ENV, n_envs=1, seed=seed)
    model = SAC("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hp)
    callback = Curve()
    model.learn(total_timesteps=steps, callback=callback)
    wall = time.perf_counter() - start
    buffer = model.replay_buffer
    arrays = [buffer.observations, buffer.next_observations, buffer.actions, buffer.rewards, buffer.dones,
              buffer.timeouts]
    per_transition = sum(a.nbytes for a in arrays) // (buffer.buffer_size * buffer.n_envs)
    env.close()
    return _summary("sb3", seed, callback.points, model.num_timesteps, wall, callback.learning_from, per_transition,
                    torch.get_num_threads())


def _summary(system: str, seed: int, curve: list[tuple[int, float]], end_steps: int, wall: float,
             learning_from: tuple[int, float] | None, per_transition: int, threads: int) -> dict[str, Any]:
    end = time.perf_counter()
    rate = ((end_steps - learning_from[0]) / max(end - learning_from[1], 1e-9)
            if learning_from is not None and end_steps > learning_from[0] else float("nan"))
    return {"system": system, "seed": seed, "steps": end_steps, "return": curve[-1][1] if curve else float("nan"),
            "wall": wall, "updating_steps_per_s": rate, "bytes_per_transition": per_transition,
            "threads": threads, "curve": curve}


def _run(system: str, seed: int, steps: int, hp: dict[str, Any], queue: Any) -> None:
    warnings.filterwarnings("ignore")
    try:
        queue.put((run_ours if system == "ours" else run_sb3)(seed, steps, hp))
    except BaseException as exc:  # the parent reports it, with the system and seed
        queue.put({"system": system, "seed": seed, "error": f"{type(exc).__name__}: {exc}"})
        raise


def run_pair(seed: int, steps: int, hp: dict[str, Any], systems: list[str], parallel: bool) -> list[dict[str, Any]]:
    """Each system in a fresh process (no import or thread state carried between runs)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    groups = [systems] if parallel else [[s] for s in systems]
    results = []
    for group in groups:
        procs = [ctx.Process(target=_run, args=(s, seed, steps, hp, queue)) for s in group]
        for p in procs:
            p.start()
        results += [queue.get() for _ in procs]
        for p in procs:
            p.join()
    return sorted(results, key=lambda r: systems.index(r["system"]))


def _at(curve: list[tuple[int, float]], step: int) -> str:
    points = [value for s, value in curve if s <= step]
    return f"{points[-1]:7.0f}" if points else "      -"


def report(runs: list[dict[str, Any]], steps: int) -> None:
    marks = list(range(10_000, steps + 1, 10_000)) or [steps]
    print(f"\n{'system':6} {'seed':>4} {'return':>8} {'wall s':>7} {'upd. steps/s':>12} {'B/trans.':>8}  "
          + " ".join(f"{m // 1000:>6}k" for m in marks))
    for r in runs:
        if "error" in r:
            print(f"{r['system']:6} {r['seed']:>4}  failed: {r['error']}")
            continue
        print(f"{r['system']:6} {r['seed']:>4} {r['return']:8.0f} {r['wall']:7.1f} {r['updating_steps_per_s']:12.1f} "
              f"{r['bytes_per_transition']:8d}  " + " ".join(_at(r["curve"], m) for m in marks))
    ok = [r for r in runs if "error" not in r]
    by = {s: [r for r in ok if r["system"] == s] for s in ("ours", "sb3")}
    if by["ours"] and by["sb3"]:
        med = {s: {k: statistics.median(r[k] for r in rs) for k in ("return", "wall", "updating_steps_per_s")}
               for s, rs in by.items()}
        spread = {s: (min(r["return"] for r in rs), max(r["return"] for r in rs)) for s, rs in by.items()}
        print(f"\nmedian return at {steps:,} steps: ours {med['ours']['return']:.0f} "
              f"(seeds {spread['ours'][0]:.0f}..{spread['ours'][1]:.0f}), SB3 {med['sb3']['return']:.0f} "
              f"(seeds {spread['sb3'][0]:.0f}..{spread['sb3'][1]:.0f})")
        print(f"median wall time: ours {med['ours']['wall']:.1f} s, SB3 {med['sb3']['wall']:.1f} s "
              f"(SB3 / ours {med['sb3']['wall'] / med['ours']['wall']:.2f}x); updating steps/s ours "
              f"{med['ours']['updating_steps_per_s']:.1f}, SB3 {med['sb3']['updating_steps_per_s']:.1f}")
        print(f"replay bytes per transition: ours {by['ours'][0]['bytes_per_transition']}, "
              f"SB3 {by['sb3'][0]['bytes_per_transition']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000, help="env steps per run (default 50000)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--no-sb3", action="store_true", help="only ours")
    parser.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=True,
                        help="both systems at once, a core each (default); --no-parallel: one after the other")
    parser.add_argument("--quick", action="store_true", help="a smoke run: seed 0, 2,000 steps, learning from 1,000")
    parser.add_argument("--json", type=Path, help="also write every run's figures and curve here")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: comma-separated ints, got {args.seeds!r}")
    hp = dict(ZOO)
    if args.quick:
        seeds, args.steps, hp["learning_starts"] = seeds[:1], 2_000, 1_000
    if args.steps < EPISODE or args.steps % EPISODE:
        parser.error(f"--steps: a whole number of {EPISODE}-step episodes, got {args.steps}")
    systems = ["ours"]
    if not args.no_sb3:
        try:
            import stable_baselines3
            systems.append("sb3")
            print(f"stable-baselines3 {stable_baselines3.__version__}")
        except ImportError:
            print("stable-baselines3 is not installed: ours only (pip install -e '.[bench]')")
    print(f"{ENV}, {args.steps:,} env steps, seeds {seeds}, learning from {hp['learning_starts']:,}, "
          f"{'at once' if args.parallel else 'one after the other'}, one torch thread each")
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        pair = run_pair(seed, args.steps, hp, systems, args.parallel)
        for r in pair:
            if "error" not in r:
                print(f"  {r['system']} seed {seed}: return {r['return']:.0f} in {r['wall']:.1f} s", flush=True)
        runs += pair
    report(runs, args.steps)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    return 1 if any("error" in r for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
