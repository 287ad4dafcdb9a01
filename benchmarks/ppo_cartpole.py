"""PPO on CartPole-v1: env steps and wall time until the 100-episode mean return reaches 475.

Ours, twice: ``PPO(config={"env": "CartPole-v1", "seed": s, "learner": L})``, nothing else set
(the defaults a user gets), with each of PPO's learners: ``"numpy"`` (the hand-derived gradient
and a numpy Adam, the automatic fast path for this network) and ``"torch"`` (autograd and
``torch.optim.Adam``: the path of every other model and device). Peer: Stable-Baselines3 PPO
with rl-zoo's CartPole-v1 hyperparameters (8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98,
gae_lambda 0.8, learning rate and clip range linear from 1e-3 and 0.2, ent_coef 0) and SB3's
default ``MlpPolicy``, the same network as ours: separate 64x64 tanh policy and value MLPs. All
run in the same process, seeds interleaved so that load from other processes hits each alike.
Every run is "solved" by the same rule: the mean return of the last 100 completed episodes
(SB3: its Monitor's episodes, read by a callback) reaches 475 within ``--max-steps`` env steps.
Wall time runs from before the trainer / model is built to the moment the rule holds; SB3 uses
torch with ``--sb3-threads`` threads (default 1, as ours: on 2 cores it is SB3's faster setting).

    python benchmarks/ppo_cartpole.py                 # 5 seeds each, a few minutes
    python benchmarks/ppo_cartpole.py --seeds 0,1 --no-sb3
    python benchmarks/ppo_cartpole.py --seeds 0 --no-sb3 --per-update   # + one update's cost
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET = 475.0


LEARNERS = ("numpy", "torch")


def run_ours(seed: int, max_steps: int, learner: str) -> dict:
    from algorithms import PPO

    start = time.perf_counter()
    trainer = PPO(config={"env": "CartPole-v1", "seed": seed, "learner": learner})
    sample_s = learn_s = 0.0
    try:
        while True:
            result = trainer.train()
            sample_s += result["sample_time_s"]
            learn_s += result["learn_time_s"]
            solved = result["episode_return_mean"] >= TARGET
            if solved or result["env_steps_total"] >= max_steps:
                break
    finally:
        trainer.stop()
    return {
        "solved": solved and result["env_steps_total"] <= max_steps,
        "steps": result["env_steps_total"],
        "wall": time.perf_counter() - start,
        "sample_s": sample_s,
        "learn_s": learn_s,
        "updates": None,
    }


def run_sb3(seed: int, max_steps: int, threads: int) -> dict:
    import numpy as np
    import torch
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class SolveCallback(BaseCallback):
        """Stops training when the mean return of the last 100 Monitor episodes reaches the target."""

        def __init__(self) -> None:
            super().__init__()
            self.returns: deque = deque(maxlen=100)
            self.solved_at: int | None = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(info["episode"]["r"])
            if self.returns and float(np.mean(self.returns)) >= TARGET:
                self.solved_at = self.num_timesteps
                return False
            return True

    def linear(initial: float):
        return lambda progress_remaining: progress_remaining * initial

    torch.set_num_threads(threads)
    start = time.perf_counter()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = SB3PPO(
        "MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed, device="cpu", verbose=0,
    )
    callback = SolveCallback()
    model.learn(total_timesteps=max_steps, callback=callback)
    wall = time.perf_counter() - start
    env.close()
    steps = callback.solved_at if callback.solved_at is not None else model.num_timesteps
    return {"solved": callback.solved_at is not None, "steps": steps, "wall": wall}


def per_update_ms(learner: str, rows: int, calls: int = 500, repeats: int = 5) -> float:
    """Milliseconds of one PPO minibatch update of ``rows`` rows under ``learner`` (best of
    ``repeats`` x ``calls``), on a trainer that has run one iteration; the same random minibatch
    for both learners. At a few rows it is the update's fixed cost: calls, not arithmetic."""
    import timeit

    import numpy as np
    import torch

    from algorithms import PPO

    trainer = PPO(config={"env": "CartPole-v1", "seed": 0, "learner": learner})
    try:
        trainer.train()
        rng = np.random.default_rng(0)
        # a minibatch as learn_on_batch hands it over: observations (rows, 4), integer actions,
        # and the four per-step columns as contiguous rows of one table
        obs, per_step = rng.standard_normal((rows, 4), dtype=np.float32), rng.standard_normal((4, rows), dtype=np.float32)
        actions = rng.integers(0, 2, rows)
        if learner == "numpy":
            minibatch: tuple = (obs, actions, *per_step)
        else:
            minibatch = (torch.from_numpy(obs), torch.from_numpy(actions), *torch.from_numpy(per_step))
        step, c = trainer.learner.step, trainer.cfg
        for _ in range(100):  # warm: allocations, the optimiser's state
            step(minibatch, c)
        return min(timeit.repeat(lambda: step(minibatch, c), number=calls, repeat=repeats)) / calls * 1e3
    finally:
        trainer.stop()


def _fmt(run: dict | None) -> str:
    if run is None:
        return "-"
    return f"{run['steps']:>7,} {run['wall']:6.1f} s" + ("" if run["solved"] else " (unsolved)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--sb3-threads", type=int, default=1)
    parser.add_argument("--no-sb3", action="store_true", help="only ours")
    parser.add_argument("--per-update", action="store_true",
                        help="also time one minibatch update of each learner at 8 and 512 rows")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    seeds = [int(s) for s in args.seeds.split(",")]

    sb3 = not args.no_sb3
    if sb3:
        try:
            import stable_baselines3  # noqa: F401
        except ImportError:
            print("stable-baselines3 is not installed: skipping the SB3 baseline (pip install -e '.[bench]')")
            sb3 = False

    import torch

    from algorithms import PPO

    defaults = PPO.default_config()
    shown = {k: defaults[k] for k in ("num_workers", "num_envs_per_worker", "train_batch_size", "minibatch_size",
                                      "num_epochs", "lr", "gamma", "lambda_", "clip_param")}
    print(f"CartPole-v1, solved = mean return of the last 100 episodes >= {TARGET:g} within {args.max_steps:,} env "
          f"steps; torch {torch.__version__}")
    print(f"ours: PPO defaults {shown}")
    print(f"{'seed':>4}  {'ours, numpy learner':>26}  {'ours, torch learner':>26}  {'SB3 rl-zoo: steps, wall':>26}",
          flush=True)
    ours: dict[str, list[dict]] = {learner: [] for learner in LEARNERS}
    peers: list[dict] = []
    for seed in seeds:
        for learner in LEARNERS:
            ours[learner].append(run_ours(seed, args.max_steps, learner))
        if sb3:
            peers.append(run_sb3(seed, args.max_steps, args.sb3_threads))
        print(f"{seed:>4}  " + "  ".join(f"{_fmt(ours[learner][-1]):>26}" for learner in LEARNERS)
              + f"  {_fmt(peers[-1] if sb3 else None):>26}", flush=True)

    def summary(runs: list[dict]) -> tuple[int, float | None, float | None]:
        solved = [r for r in runs if r["solved"]]
        if not solved:
            return 0, None, None
        return len(solved), statistics.median(r["steps"] for r in solved), statistics.median(r["wall"] for r in solved)

    walls = {}
    for learner in LEARNERS:
        runs = ours[learner]
        n, steps, walls[learner] = summary(runs)
        print(f"\nours, {learner} learner: solved {n}/{len(seeds)} (target >= 4/5); median of solved runs: "
              f"{steps or 0:,.0f} env steps, {walls[learner] or 0:.1f} s wall "
              f"(sampling {statistics.median(r['sample_s'] for r in runs):.1f} s, "
              f"learning {statistics.median(r['learn_s'] for r in runs):.1f} s)", end="")
    print()
    if walls["numpy"] and walls["torch"]:
        print(f"wall time, torch learner / numpy learner: {walls['torch'] / walls['numpy']:.2f}x (target <= 1.5x)")
        # the learners' floating-point sums differ, so one seed's runs solve at different env
        # steps: the same ratio per env step takes that luck out
        per_step = statistics.median(t["wall"] / t["steps"] / (n["wall"] / n["steps"])
                                     for t, n in zip(ours["torch"], ours["numpy"]))
        print(f"wall time per env step, torch learner / numpy learner (median over seeds): {per_step:.2f}x")
    if args.per_update:
        for rows in (8, 512):
            ms = {learner: per_update_ms(learner, rows) for learner in LEARNERS}
            print(f"one update of {rows} rows: " + ", ".join(f"{learner} {ms[learner]:.2f} ms" for learner in LEARNERS)
                  + f" (torch / numpy {ms['torch'] / ms['numpy']:.2f}x)")
    if sb3:
        n_sb3, steps_sb3, wall_sb3 = summary(peers)
        print(f"SB3 rl-zoo (torch threads {args.sb3_threads}): solved {n_sb3}/{len(seeds)}; median of solved runs: "
              f"{steps_sb3 or 0:,.0f} env steps, {wall_sb3 or 0:.1f} s wall")
        for learner in LEARNERS:
            if walls[learner] and wall_sb3:
                print(f"wall time to {TARGET:g}, ours ({learner} learner) / SB3: {walls[learner] / wall_sb3:.2f}x "
                      f"({wall_sb3 / walls[learner]:.1f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
