"""The return at equal env steps, over many seeds: ours next to SB3's PPO, synchronous and streamed.

``benchmarks/slow_sim.py`` reads each trial's 100-episode mean return at equal env steps (about
24k) and prints the mean over its 4 trials: ours sat 1-3% under SB3's in every run. Four trials
are too few to tell a real difference from the seeds' spread, and slow_sim's sweeps take minutes,
so this script runs the same PPO many times, cheaply, in three variants:

* ``sb3``: Stable-Baselines3's PPO on a ``DummyVecEnv`` of 8 ``CartPole-v1`` (``--sb3-vec
  subproc``: slow_sim's ``SubprocVecEnv``, the same numbers for a seed, slower), in this process;
* ``sync``: ours, synchronous, 8 envs sampled in the learner's process (``num_workers=0,
  num_envs_per_worker=8``): every batch sampled with the weights of the last update, as SB3's;
* ``stream``: ours as slow_sim runs it: ``tune.run("PPO")`` with 8 rollout actors of 1 env,
  ``sample_async=True`` (each actor steps without pause and loads new weights between two steps;
  the steps sampled with older weights are corrected, see ``PPO._correct_stale``), 2 trials at
  once, on ``tuner/SlowCartPole-v1`` with slow_sim's step times (3 ms, 100 ms with p=0.03), so
  the learner's time against the actors' sampling, and so the share of stale steps, is slow_sim's.
  The return does not depend on the sleep, only on which weights sampled which steps: the stale
  share is printed with it.

The PPO is slow_sim's everywhere (``benchmarks/peers/common.py``): a batch of 2,048 env steps
(256 x 8 envs), 10 epochs of minibatches of 512, gamma 0.99, GAE lambda 0.95, clip 0.2, value
loss 0.5 x MSE, no entropy bonus, separate 64x64 tanh networks, Adam (eps 1e-5), gradient norm
0.5; the learning rates 1e-3 and 2.5e-3 (``--lrs``), each with ``--seeds`` seeds drawn from
``--seed`` (every variant gets the same (lr, seed) pairs). Each run stops at its first iteration
boundary at or past ``--steps``; its curve (the 100-episode mean return at each iteration
boundary) is read at ``--steps`` env steps, interpolated linearly between the boundaries around
it, as slow_sim reads it (``Outcome.return_of``).

Printed: per variant the mean, median, standard error and spread of that return over all runs
(and the mean per learning rate); then the difference of every pair of variants over the same
(lr, seed) pairs: mean, standard error of the paired differences, and mean / SE. Our two
variants share a seed's first weights; SB3's seed is another stream of numbers, so its pairing
with ours is by name only (the SE is then that of two independent samples, about).

    python benchmarks/return_gap.py                           # 10 seeds x 2 lrs x 3 variants, 10-20 min on 2 cores
    python benchmarks/return_gap.py --variants sb3,sync --seeds 30 --save /tmp/gap.json
    python benchmarks/return_gap.py --variants sync --seeds 30 --load /tmp/gap.json:before
    python benchmarks/return_gap.py --variants "" --load a.json:x --load b.json:x   # the tables of saved runs

``--save`` writes every run (its curve too) to a JSON file; ``--load FILE[:LABEL]`` adds the runs
of such a file to the tables without running them again (their variants named ``VARIANT@LABEL``;
the runs of files with the same label add up): before and after a change, over the same seeds.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Ray's workers import this tree's packages too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from benchmarks.peers.common import (CLIP, ENTROPY_COEF, GAE_LAMBDA, GAMMA, HIDDEN, MAX_GRAD_NORM,  # noqa: E402
                                     VF_COEF, Curve, Outcome, mean_last_100, ray_init)

VARIANTS = ("sb3", "sync", "stream")
ENVS = 8
ROLLOUT = 256  # steps of each env per update: a batch of ROLLOUT x ENVS
MINIBATCH = 512
EPOCHS = 10

Config = tuple[float, int]  # (lr, seed)


def ours_config(lr: float, seed: int) -> dict[str, Any]:
    """Our PPO's keys for the shared objective (slow_sim's ``run_tuner``), sampling left to the variant."""
    return {
        "train_batch_size": ROLLOUT * ENVS, "minibatch_size": MINIBATCH, "num_epochs": EPOCHS,
        "gamma": GAMMA, "lambda": GAE_LAMBDA, "clip_param": CLIP,
        # SB3's value loss is vf_coef * mse, ours vf_loss_coeff * 0.5 * mse: twice the coefficient
        "vf_loss_coeff": 2 * VF_COEF, "vf_clip_param": None,
        "entropy_coeff": ENTROPY_COEF, "max_grad_norm": MAX_GRAD_NORM, "hidden_sizes": list(HIDDEN),
        "activation": "tanh", "lr": lr, "seed": seed,
    }


# -- the variants: each returns {config: run}, a run being {"curve": [[steps, return], ...], ...} --
def run_sb3(configs: list[Config], steps: int, vec: str) -> dict[Config, dict[str, Any]]:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    class Points(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.points: Curve = []

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:  # after the rollout, before its update: our iteration's result
            returns = [float(e["r"]) for e in self.model.ep_info_buffer]  # SB3 keeps the last 100
            self.points.append((int(self.num_timesteps), mean_last_100(returns)))

    torch.set_num_threads(1)  # the one CPU every learner gets
    out = {}
    for lr, seed in configs:
        start = time.perf_counter()
        env = make_vec_env("CartPole-v1", n_envs=ENVS, seed=seed,
                           vec_env_cls=SubprocVecEnv if vec == "subproc" else DummyVecEnv)
        try:
            model = PPO(
                "MlpPolicy", env, learning_rate=lr, n_steps=ROLLOUT, batch_size=MINIBATCH, n_epochs=EPOCHS,
                gamma=GAMMA, gae_lambda=GAE_LAMBDA, clip_range=CLIP, ent_coef=ENTROPY_COEF, vf_coef=VF_COEF,
                max_grad_norm=MAX_GRAD_NORM, seed=seed, device="cpu", verbose=0,
                policy_kwargs={"net_arch": {"pi": list(HIDDEN), "vf": list(HIDDEN)}, "activation_fn": torch.nn.Tanh},
            )
            points = Points()
            model.learn(total_timesteps=steps, callback=points)
        finally:
            env.close()
        out[(lr, seed)] = {"curve": points.points, "wall_s": time.perf_counter() - start}
        _progress("sb3", lr, seed, out[(lr, seed)])
    return out


def run_sync(configs: list[Config], steps: int) -> dict[Config, dict[str, Any]]:
    from algorithms import PPO

    out = {}
    for lr, seed in configs:
        start = time.perf_counter()
        trainer = PPO(config={**ours_config(lr, seed), "env": "CartPole-v1", "num_workers": 0,
                              "num_envs_per_worker": ENVS})
        curve, batch = [], []
        try:
            while not curve or curve[-1][0] < steps:
                result = trainer.train()
                curve.append((int(result["env_steps_total"]), float(result["episode_return_mean"])))
                batch.append(int(result["env_steps_this_iter"]))
        finally:
            trainer.stop()
        out[(lr, seed)] = {"curve": curve, "wall_s": time.perf_counter() - start,
                           "batch_mean": statistics.mean(batch), "learner": result["learner"]}
        _progress("sync", lr, seed, out[(lr, seed)])
    return out


def run_stream(lrs: list[float], seeds: list[int], steps: int, env_config: dict[str, float], concurrency: int,
               storage: str) -> dict[Config, dict[str, Any]]:
    """slow_sim's sweep of ours (``run_tuner``): the grid of ``lrs`` x ``seeds``, ``concurrency``
    trials at once."""
    import ray
    from tuner import tune

    ray_init(concurrency * (ENVS + 1))
    try:
        analysis = tune.run(
            "PPO",
            config={**ours_config(0.0, 0), "env": "tuner/SlowCartPole-v1", "env_config": env_config,
                    "num_workers": ENVS, "num_envs_per_worker": 1, "sample_async": True,
                    "num_cpus_per_worker": 1.0, "num_cpus_for_learner": 1.0,
                    "lr": tune.grid_search(lrs), "seed": tune.grid_search(seeds)},
            stop={"env_steps_total": steps}, max_concurrent_trials=concurrency,
            metric="episode_return_mean", mode="max",
            storage_path=storage, name=f"return_gap_{time.strftime('%Y%m%d_%H%M%S')}", verbose=0,
        )
    finally:
        ray.shutdown()
    out = {}
    frames = analysis.trial_dataframes
    for trial in analysis.trials:
        config = (float(trial.config["lr"]), int(trial.config["seed"]))
        frame = frames.get(trial.trial_id)
        if trial.status != "TERMINATED" or frame is None or frame.empty:
            print(f"stream: trial {config} {trial.status}, left out", file=sys.stderr)
            continue
        steps_this = frame["env_steps_this_iter"].astype(float)
        out[config] = {
            "curve": [(int(s), float(r)) for s, r in zip(frame["env_steps_total"], frame["episode_return_mean"])],
            "wall_s": float(frame["time_total_s"].iloc[-1]),
            "batch_mean": float(steps_this.mean()),
            # the share of the run's transitions sampled with weights older than the learner's
            "stale": float((frame["stale_fraction"] * steps_this).sum() / steps_this.sum()),
            "stale_per_iter": [round(float(v), 4) for v in frame["stale_fraction"]],
            "learner": str(frame["learner"].iloc[-1]),
            "learn_s": float(frame["learn_time_s"].mean()), "sample_s": float(frame["sample_time_s"].mean()),
        }
        _progress("stream", *config, out[config])
    return out


def _progress(variant: str, lr: float, seed: int, run: dict[str, Any]) -> None:
    last = run["curve"][-1] if run["curve"] else (0, math.nan)
    print(f"  {variant:6} lr {lr:g} seed {seed}: {last[0]:,} env steps, return {last[1]:.1f} at the end, "
          f"{run['wall_s']:.1f} s", file=sys.stderr, flush=True)


# -- the statistics ------------------------------------------------------------------------------
def return_at(run: dict[str, Any], steps: int) -> float:
    """The run's 100-episode mean return at ``steps`` env steps, read as slow_sim reads it."""
    return Outcome("", 0.0, 0, {(0.0, 0): [tuple(p) for p in run["curve"]]}).return_of((0.0, 0), steps)


def summary(values: list[float]) -> tuple[int, float, float, float, float, float]:
    """(n, mean, median, standard error of the mean, min, max) of the values that are not NaN."""
    values = [v for v in values if not math.isnan(v)]
    n = len(values)
    if not n:
        return 0, math.nan, math.nan, math.nan, math.nan, math.nan
    se = statistics.stdev(values) / math.sqrt(n) if n > 1 else math.nan
    return n, statistics.mean(values), statistics.median(values), se, min(values), max(values)


def print_tables(runs: dict[str, dict[Config, dict[str, Any]]], steps: int, lrs: list[float],
                 out: Any = sys.stdout) -> None:
    at = {v: {c: return_at(r, steps) for c, r in by.items()} for v, by in runs.items()}
    print(f"\n100-episode mean return at {steps:,} env steps, per variant (all runs; then the mean per lr)", file=out)
    print(f"{'variant':16} {'runs':>4} {'mean':>7} {'median':>7} {'SE':>5} {'min-max':>13} "
          + " ".join(f"{f'lr {lr:g}':>10}" for lr in lrs) + f" {'batch':>7} {'stale':>6}", file=out)
    for variant, by in at.items():
        n, mean, median, se, low, high = summary(list(by.values()))
        per_lr = [summary([v for (lr, _), v in by.items() if lr == want])[1] for want in lrs]
        batches = [r["batch_mean"] for r in runs[variant].values() if "batch_mean" in r]
        stale = [r["stale"] for r in runs[variant].values() if "stale" in r]
        print(f"{variant:16} {n:4d} {mean:7.1f} {median:7.1f} {se:5.1f} {f'{low:.0f}-{high:.0f}':>13} "
              + " ".join(f"{v:10.1f}" for v in per_lr)
              + f" {statistics.mean(batches) if batches else ROLLOUT * ENVS:7.0f}"
              + f" {f'{statistics.mean(stale):.1%}' if stale else '-':>6}", file=out)
    print("(batch: transitions per update, mean; stale: the share of transitions sampled with older weights)", file=out)
    names = list(at)
    if len(names) < 2:
        return
    print(f"\npaired differences at {steps:,} env steps (second - first, over the (lr, seed) pairs both ran)", file=out)
    print(f"{'first':16} {'second':16} {'pairs':>5} {'mean':>7} {'SE':>5} {'mean/SE':>7} {'relative':>8}", file=out)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            shared = [c for c in at[first] if c in at[second]
                      and not math.isnan(at[first][c]) and not math.isnan(at[second][c])]
            if len(shared) < 2:
                continue
            diffs = [at[second][c] - at[first][c] for c in shared]
            _, mean, _, se, _, _ = summary(diffs)
            base = statistics.mean(at[first][c] for c in shared)
            ratio = mean / se if se else math.nan  # identical runs: no spread to judge the difference by
            print(f"{first:16} {second:16} {len(shared):5d} {mean:+7.1f} {se:5.1f} {ratio:+7.2f} "
                  f"{mean / base:+8.1%}", file=out)


# -- the run ---------------------------------------------------------------------------------------
def _lrs(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers > 0, got {text!r}")
    return values


def _at_least(minimum: int) -> Any:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an int >= {minimum}, got {text}")
        return value
    return parse


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def load(spec: str) -> dict[str, dict[Config, dict[str, Any]]]:
    """The runs saved in ``FILE`` (``FILE:LABEL``: their variants named ``VARIANT@LABEL``)."""
    path, _, label = spec.partition(":")
    saved = json.loads(Path(path).read_text())
    return {f"{variant}@{label}" if label else variant: {(float(r["lr"]), int(r["seed"])): r for r in rows}
            for variant, rows in saved["runs"].items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    p.add_argument("--lrs", type=_lrs, default=[1e-3, 2.5e-3], help="learning rates (default 1e-3,2.5e-3)")
    p.add_argument("--seeds", type=_at_least(1), default=10, help="seeds per lr, drawn from --seed (default 10)")
    p.add_argument("--seed", type=_at_least(0), default=0, help="draws the seeds (default 0)")
    p.add_argument("--steps", type=_at_least(1), default=24_000, help="env steps per run; returns are read there")
    p.add_argument("--sb3-vec", choices=("dummy", "subproc"), default="dummy", help="SB3's vector env (default dummy)")
    p.add_argument("--fast-ms", type=_non_negative, default=3.0, help="stream: the usual step, ms (default 3)")
    p.add_argument("--slow-ms", type=_non_negative, default=100.0, help="stream: the slow step, ms (default 100)")
    p.add_argument("--slow-prob", type=_non_negative, default=0.03, help="stream: probability of a slow step (0.03)")
    p.add_argument("--concurrency", type=_at_least(1), default=2, help="stream: trials at once (default 2)")
    p.add_argument("--save", default=None, help="write every run to this JSON file")
    p.add_argument("--load", action="append", default=[], help="FILE[:LABEL]: add the runs saved there (repeatable)")
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        p.error(f"--variants: unknown {unknown} (allowed: {', '.join(VARIANTS)})")
    if args.slow_prob > 1:
        p.error(f"--slow-prob: must be a probability in [0, 1], got {args.slow_prob}")
    import numpy as np

    seeds = [int(s) for s in np.random.default_rng(args.seed).choice(100_000, size=args.seeds, replace=False)]
    configs = [(lr, seed) for seed in seeds for lr in args.lrs]
    warnings.filterwarnings("ignore")
    logging.getLogger("ray").setLevel(logging.ERROR)
    print(f"return at equal env steps: PPO on CartPole, lr {', '.join(f'{v:g}' for v in args.lrs)} x "
          f"{args.seeds} seeds (from --seed {args.seed}), {args.steps:,} env steps per run; variants "
          f"{', '.join(variants) or '-'}; stream on SlowCartPole {args.fast_ms:g} ms, {args.slow_ms:g} ms with "
          f"p={args.slow_prob:g}, {args.concurrency} trials at once; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)

    runs: dict[str, dict[Config, dict[str, Any]]] = {}
    for spec in args.load:  # files of the same label add up: more seeds of the same variants
        for variant, by in load(spec).items():
            runs.setdefault(variant, {}).update(by)
    for variant in variants:
        start = time.perf_counter()
        print(f"running {variant} ...", file=sys.stderr, flush=True)
        if variant == "sb3":
            runs[variant] = run_sb3(configs, args.steps, args.sb3_vec)
        elif variant == "sync":
            runs[variant] = run_sync(configs, args.steps)
        else:
            env_config = {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob}
            with tempfile.TemporaryDirectory(prefix="return_gap_") as storage:
                runs[variant] = run_stream(args.lrs, seeds, args.steps, env_config, args.concurrency, storage)
        print(f"{variant}: {len(runs[variant])} runs in {time.perf_counter() - start:.0f} s", flush=True)
    if args.save:
        Path(args.save).write_text(json.dumps({
            "args": {k: v for k, v in vars(args).items() if k not in ("save", "load")}, "seeds": seeds,
            "runs": {v: [{"lr": c[0], "seed": c[1], **r} for c, r in runs[v].items()] for v in variants},
        }))
    print_tables(runs, args.steps, args.lrs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
