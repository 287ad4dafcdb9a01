"""PPO on Pendulum-v1 (continuous actions): the return curve next to Stable-Baselines3's.

Both use rl-zoo's PPO hyperparameters for Pendulum-v1: 4 envs, 1024 steps per env per
iteration (4096), minibatch 64, 10 epochs, gamma 0.9, lambda 0.95, lr 1e-3, clip 0.2, no entropy
bonus, gSDE exploration with new noise every 4 steps (``use_sde=True, sde_sample_freq=4``); ours
written with our config keys. The network and the other settings (64x64 tanh, vf coeff 0.5,
gradient norm 0.5, normalised advantages, log std initialised at 0) are the same defaults on
both sides. ``--no-sde``: both explore with a plain state-independent Gaussian instead (if SB3
fails with gSDE it falls back to that and says so). The curve is the mean return of the last
100 completed episodes after each 4096-step iteration, the same rule for both (SB3: its
Monitor's episodes).

    python benchmarks/pendulum.py                    # 100k steps, seed 0: a few minutes
    python benchmarks/pendulum.py --steps 50000 --seeds 0,1,2
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

OURS = {
    "env": "Pendulum-v1",
    "num_envs_per_worker": 4,
    "train_batch_size": 4096,
    "minibatch_size": 64,
    "num_epochs": 10,
    "gamma": 0.9,
    "lambda": 0.95,
    "lr": 1e-3,
    "clip_param": 0.2,
    "entropy_coeff": 0.0,
}


def run_ours(seed: int, steps: int, sde: bool) -> tuple[list[tuple[int, float]], float]:
    from algorithms import PPO

    start = time.perf_counter()
    trainer = PPO(config={**OURS, "seed": seed, "use_sde": sde, "sde_sample_freq": 4 if sde else -1})
    curve: list[tuple[int, float]] = []
    try:
        while not curve or curve[-1][0] < steps:
            result = trainer.train()
            curve.append((result["env_steps_total"], result["episode_return_mean"]))
            print(f"  ours seed {seed}: {curve[-1][0]:>7,} steps  return {curve[-1][1]:8.1f}", flush=True)
    finally:
        trainer.stop()
    return curve, time.perf_counter() - start


def run_sb3(seed: int, steps: int, sde: bool, threads: int) -> tuple[list[tuple[int, float]], float, bool]:
    import numpy as np
    import torch
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Curve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque = deque(maxlen=100)
            self.points: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(info["episode"]["r"])
            return True

        def _on_rollout_end(self) -> None:
            mean = float(np.mean(self.returns)) if self.returns else float("nan")
            self.points.append((self.num_timesteps, mean))
            print(f"  SB3  seed {seed}: {self.num_timesteps:>7,} steps  return {mean:8.1f}", flush=True)

    torch.set_num_threads(threads)
    start = time.perf_counter()
    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    kwargs = dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3,
                  clip_range=0.2, seed=seed, device="cpu", verbose=0)
    used_sde = sde
    try:
        model = SB3PPO("MlpPolicy", env, use_sde=sde, sde_sample_freq=4 if sde else -1, **kwargs)
    except Exception as exc:  # noqa: BLE001 - report and fall back
        print(f"  SB3 with gSDE failed ({exc}); running it without gSDE")
        model, used_sde = SB3PPO("MlpPolicy", env, **kwargs), False
    callback = Curve()
    model.learn(total_timesteps=steps, callback=callback)
    env.close()
    return callback.points, time.perf_counter() - start, used_sde


def steps_to(curve: list[tuple[int, float]], level: float) -> int | None:
    return next((s for s, r in curve if r >= level), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--no-sb3", action="store_true")
    parser.add_argument("--no-sde", action="store_true", help="both without gSDE")
    parser.add_argument("--sb3-threads", type=int, default=1)
    parser.add_argument("--level", type=float, default=-400.0, help="return level for 'steps to reach' (default -400)")
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

    ours_curves, sb3_curves, used_sde = [], [], not args.no_sde
    ours_wall, sb3_wall = [], []
    for seed in seeds:
        curve, wall = run_ours(seed, args.steps, not args.no_sde)
        ours_curves.append(curve)
        ours_wall.append(wall)
        if sb3:
            curve, wall, used = run_sb3(seed, args.steps, not args.no_sde, args.sb3_threads)
            sb3_curves.append(curve)
            sb3_wall.append(wall)
            used_sde = used_sde and used

    def mean_curve(curves: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
        n = min(len(c) for c in curves)
        return [(curves[0][i][0], statistics.fmean(c[i][1] for c in curves)) for i in range(n)]

    ours_mean = mean_curve(ours_curves)
    peer_name = f"SB3 rl-zoo ({'gSDE' if used_sde else 'no gSDE'})"
    ours_name = "ours (gSDE)" if not args.no_sde else "ours"
    print(f"\nPendulum-v1, mean return of the last 100 episodes, mean over seeds {seeds}")
    print(f"{'env steps':>9}  {ours_name:>12}  {peer_name:>22}")
    peer_mean = mean_curve(sb3_curves) if sb3 else []
    for i, (step, ret) in enumerate(ours_mean):
        peer = f"{peer_mean[i][1]:>22.1f}" if i < len(peer_mean) else f"{'-':>22}"
        print(f"{step:>9,}  {ret:>12.1f}  {peer}")

    def auc(curve: list[tuple[int, float]]) -> float:
        return statistics.fmean(r for _, r in curve)

    print(f"\n{ours_name}: final {ours_mean[-1][1]:.1f}, mean over the curve {auc(ours_mean):.1f}, "
          f"steps to {args.level:g}: {steps_to(ours_mean, args.level) or 'not reached'}, "
          f"wall {statistics.fmean(ours_wall):.0f} s")
    if sb3:
        print(f"{peer_name}: final {peer_mean[-1][1]:.1f}, mean over the curve {auc(peer_mean):.1f}, "
              f"steps to {args.level:g}: {steps_to(peer_mean, args.level) or 'not reached'}, "
              f"wall {statistics.fmean(sb3_wall):.0f} s")
        ours_at, peer_at = steps_to(ours_mean, args.level), steps_to(peer_mean, args.level)
        if ours_at and peer_at:
            print(f"steps to {args.level:g}, ours / SB3: {ours_at / peer_at:.2f}x (<= 1: at least as sample-efficient); "
                  f"final return ours - SB3: {ours_mean[-1][1] - peer_mean[-1][1]:+.1f}; "
                  f"wall ours / SB3: {statistics.fmean(ours_wall) / statistics.fmean(sb3_wall):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
