"""The race to a return rule, ours against Stable-Baselines3: one trainer of ours and SB3's same
algorithm with the same hyperparameters and seeds, each run until the mean return of its last
episodes reaches a target (or a step cap), the rule checked at the same points, wall time from
before the trainer is built; seeds interleaved (ours, SB3, ours, ...) after an untimed warm-up of
each, then a table of steps and wall times with their ratios. ``benchmarks/off_policy.py`` (DQN,
SAC, TD3) and ``benchmarks/a2c_cartpole.py`` describe their algorithms with a :class:`Spec` and call
:func:`compare`."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections import deque
from typing import Any

@dataclasses.dataclass(frozen=True)
class Spec:
    """One algorithm's comparison: env, rule, step cap, hyperparameters and their mapping."""

    name: str  # our class and SB3's
    env: str
    target: float  # the rule: mean return of the last `window` episodes >= target
    window: int
    max_steps: int
    zoo: dict[str, Any]
    ours: Any  # (hp, total_steps) -> our config
    warmup: dict[str, Any]  # hyperparameter changes of the untimed warm-up run
    warmup_steps: int
    note: str = ""  # printed under our config: what ours runs beyond it
    n_envs: int = 1  # SB3's envs (make_vec_env's n_envs); our config says ours
    round: str = ""  # what a round is, when it is not train_freq env steps and their updates


def run_ours(spec: Spec, seed: int, max_steps: int, threads: int, stop_at_solve: bool,
             hp: dict[str, Any] | None = None, warmup: bool = False) -> dict[str, Any]:
    import torch

    from algorithms.core.names import trainer_class

    cls = trainer_class(spec.name)
    config = {**spec.ours(hp or spec.zoo, max_steps), "seed": seed,
              "num_cpus_for_learner": float(threads)}
    if warmup and "min_sample_timesteps_per_iteration" in cls.default_config():  # a few steps, with updates
        config["min_sample_timesteps_per_iteration"] = max_steps
        config["num_steps_sampled_before_learning_starts"] = 0
    start = time.perf_counter()
    trainer = cls(config=config)
    threads_used = torch.get_num_threads()
    solved_at = solved_wall = None
    steps, best = 0, (-math.inf, 0)
    try:
        while steps < max_steps:
            result = trainer.train()
            steps = result["env_steps_total"]
            if result["episode_return_mean"] > best[0]:
                best = (result["episode_return_mean"], steps)
            if solved_at is None and steps <= max_steps and result["episode_return_mean"] >= spec.target:
                solved_at, solved_wall = steps, time.perf_counter() - start
                if stop_at_solve:
                    break
    finally:
        trainer.stop()
    return {"steps": solved_at, "wall": solved_wall, "total": time.perf_counter() - start, "final_steps": steps,
            "threads": threads_used, "best": best}


def run_sb3(spec: Spec, seed: int, max_steps: int, threads: int, stop_at_solve: bool,
            hp: dict[str, Any] | None = None) -> dict[str, Any]:
    import numpy as np
    import torch
    import stable_baselines3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    target, window = spec.target, spec.window

    class RuleCallback(BaseCallback):
        """The rule on the Monitor's episode returns: evaluated after each round's env steps, timed
        after its updates (the next round's start, or the end of training); also the first episode
        end at which it held."""

        def __init__(self) -> None:
            super().__init__()
            self.returns: deque = deque(maxlen=window)
            self.solved_at: int | None = None
            self.solved_wall: float | None = None
            self.episode_solved_at: int | None = None
            self.best = (-math.inf, 0)  # the best mean at a check, and its env step
            self.stop = False

        def _holds(self) -> bool:
            return bool(self.returns) and float(np.mean(self.returns)) >= target

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(info["episode"]["r"])
                    if self.episode_solved_at is None and self._holds():
                        self.episode_solved_at = self.num_timesteps
            return not self.stop

        def _on_rollout_end(self) -> None:
            if self.returns and float(np.mean(self.returns)) > self.best[0]:
                self.best = (float(np.mean(self.returns)), self.num_timesteps)
            if self.solved_at is None and self.num_timesteps <= max_steps and self._holds():
                self.solved_at = self.num_timesteps

        def _time_it(self) -> None:
            if self.solved_at is not None and self.solved_wall is None:
                self.solved_wall = time.perf_counter() - start
                self.stop = stop_at_solve

        def _on_rollout_start(self) -> None:
            self._time_it()

        def _on_training_end(self) -> None:
            self._time_it()

    hp = dict(hp or spec.zoo)
    cls = getattr(stable_baselines3, spec.name)
    torch.set_num_threads(threads)
    start = time.perf_counter()
    env = make_vec_env(spec.env, n_envs=spec.n_envs, seed=seed)
    if "action_noise_std" in hp:
        from stable_baselines3.common.noise import NormalActionNoise

        width = int(np.prod(env.action_space.shape))
        hp["action_noise"] = NormalActionNoise(np.zeros(width), hp.pop("action_noise_std") * np.ones(width))
    model = cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hp)
    callback = RuleCallback()
    model.learn(total_timesteps=max_steps, callback=callback)
    env.close()
    return {"steps": callback.solved_at, "wall": callback.solved_wall, "total": time.perf_counter() - start,
            "final_steps": model.num_timesteps, "threads": torch.get_num_threads(),
            "episode_steps": callback.episode_solved_at, "best": callback.best}


# -- the report ----------------------------------------------------------------------------------
def _cap(steps: int) -> str:
    return f"{steps // 1000}k" if steps % 1000 == 0 else f"{steps:,}"


def _steps(run: dict | None, cap: int) -> str:
    if run is None:
        return "-"
    return f"{run['steps']:,}" if run["steps"] is not None else f"not within {_cap(cap)}"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(num: float | None, den: float | None, fmt: str, suffix: str = "") -> str:
    if num is None or den is None or not math.isfinite(num) or not math.isfinite(den) or den <= 0:
        return "-"
    return format(num / den, fmt) + suffix


def _progress(system: str, seed: int, run: dict, spec: Spec, cap: int) -> None:
    """One run's line, as it ends; a run that missed the rule says the best mean it reached."""
    best = "" if run["steps"] is not None or not math.isfinite(run["best"][0]) else (
        f"; best {spec.window}-episode mean {run['best'][0]:.1f} at {run['best'][1]:,} env steps")
    print(f"  {system} seed {seed}: {_steps(run, cap)} env steps, {_secs(run['wall'])} s to the rule, "
          f"{run['total']:.1f} s total ({run['final_steps']:,} env steps, torch threads {run['threads']}{best})",
          flush=True)


def _pair_ratios(ours: dict, peer: dict | None) -> tuple[str, str]:
    """(SB3 wall / ours wall, ours steps / SB3 steps) of one seed; a bound ('>', '<') when only one
    system met the rule (the other's figure is then at least its total / its final step count)."""

    def bound(sign: str, ratio: str) -> str:
        return ratio if ratio == "-" else sign + ratio

    if peer is None:
        return "-", "-"
    if ours["steps"] is not None and peer["steps"] is not None:
        return _ratio(peer["wall"], ours["wall"], ".2f", "x"), _ratio(ours["steps"], peer["steps"], ".2f")
    if ours["steps"] is not None:  # SB3 did not make it: its wall > its total, its steps > its final count
        return (bound(">", _ratio(peer["total"], ours["wall"], ".2f", "x")),
                bound("<", _ratio(ours["steps"], peer["final_steps"], ".2f")))
    if peer["steps"] is not None:
        return (bound("<", _ratio(peer["wall"], ours["total"], ".2f", "x")),
                bound(">", _ratio(ours["final_steps"], peer["steps"], ".2f")))
    return "-", "-"


def _median(runs: list[dict], key: str) -> float:
    """Median of ``key`` over runs, a run that missed the rule counting as infinitely late."""
    return statistics.median(math.inf if r[key] is None else r[key] for r in runs)


def _fmt_median(value: float, fmt: str, cap: int | None = None) -> str:
    if math.isinf(value):
        return f"not within {_cap(cap)}" if cap is not None else "-"
    return format(value, fmt)


#: Student's t, two-sided 95%, by degrees of freedom (1-30; 1.96 beyond).
_T95 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
        2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04]


def _paired_steps(ours: list[dict], peers: list[dict]) -> str:
    """The per-seed ratio of env steps to the rule, ours / SB3, over the seeds both solved: its
    geometric mean and 95% interval (a t interval on the log ratios). On a few seeds the medians
    move by 10-15% from one seed set to the next; the interval says how much the seeds can tell."""
    logs = [math.log(o["steps"] / p["steps"]) for o, p in zip(ours, peers)
            if o["steps"] is not None and p["steps"] is not None]
    if len(logs) < 2:
        return "per-seed env steps, ours / SB3: fewer than two seeds solved by both"
    df = len(logs) - 1
    mean = statistics.mean(logs)
    half = (_T95[df - 1] if df <= len(_T95) else 1.96) * statistics.stdev(logs) / math.sqrt(len(logs))
    return (f"per-seed env steps, ours / SB3, over the {len(logs)} seeds both solved: geometric mean "
            f"{math.exp(mean):.3f}, 95% interval {math.exp(mean - half):.2f}-{math.exp(mean + half):.2f}")


def compare(algo: str, spec: Spec, seeds: list[int], max_steps: int, threads: int, sb3: bool,
            stop_at_solve: bool, warmup: bool) -> None:
    import torch

    round_text = spec.round or f"train_freq {spec.zoo['train_freq']} env steps and their updates"
    print(f"\n=== {spec.name} on {spec.env}: solved = mean return of the last {spec.window} episodes >= "
          f"{spec.target:g} within {max_steps:,} env steps, checked after every round ({round_text}); "
          f"seeds {','.join(map(str, seeds))}; "
          f"{'both stop when solved' if stop_at_solve else 'both run to the cap'}")
    print(f"ours: {spec.name}(config={spec.ours(spec.zoo, max_steps)} + seed, num_cpus_for_learner={float(threads)})")
    if spec.note:
        print(spec.note)
    if sb3:
        print(f"SB3:  {spec.name}('MlpPolicy', make_vec_env({spec.env!r}, n_envs={spec.n_envs}, seed=s), seed=s, "
              f"device='cpu', "
              f"**{spec.zoo}).learn(total_timesteps={max_steps})")
    if warmup:  # untimed: imports, first kernels, gymnasium's env modules, for each system
        hp = {**spec.zoo, **spec.warmup}
        run_ours(spec, 10_000, spec.warmup_steps, threads, False, hp=hp, warmup=True)
        if sb3:
            run_sb3(spec, 10_000, spec.warmup_steps, threads, False, hp=hp)

    ours: list[dict] = []
    peers: list[dict] = []
    rows: list[str] = []
    header = (f"{'seed':>4}  {'ours steps':>16} {'ours wall s':>11} {'ours total s':>12}  {'SB3 steps':>16} "
              f"{'SB3 wall s':>10} {'SB3 total s':>11}  {'SB3/ours wall':>13} {'ours/SB3 steps':>14}")
    for seed in seeds:  # interleaved: ours seed s, SB3 seed s, ours seed s+1, ...
        torch.set_num_threads(threads)
        ours.append(run_ours(spec, seed, max_steps, threads, stop_at_solve))
        _progress("ours", seed, ours[-1], spec, max_steps)
        if ours[-1]["threads"] != threads:
            print(f"  WARNING: ours ran with {ours[-1]['threads']} torch threads, not --threads {threads}")
        peer = None
        if sb3:
            peer = run_sb3(spec, seed, max_steps, threads, stop_at_solve)
            peers.append(peer)
            _progress("SB3 ", seed, peer, spec, max_steps)
        wall_ratio, steps_ratio = _pair_ratios(ours[-1], peer)
        rows.append(f"{seed:>4}  {_steps(ours[-1], max_steps):>16} {_secs(ours[-1]['wall']):>11} "
                    f"{ours[-1]['total']:>12.1f}  {_steps(peer, max_steps):>16} "
                    f"{_secs(peer['wall'] if peer else None):>10} {_secs(peer['total'] if peer else None):>11}  "
                    f"{wall_ratio:>13} {steps_ratio:>14}")

    med = {"steps": _median(ours, "steps"), "wall": _median(ours, "wall"),
           "total": statistics.median(r["total"] for r in ours)}
    pmed = ({"steps": _median(peers, "steps"), "wall": _median(peers, "wall"),
             "total": statistics.median(r["total"] for r in peers)} if sb3 else None)
    print(f"\n{spec.name} on {spec.env}, torch threads {threads} (both)")
    print(header)
    for row in rows:
        print(row)
    print(f"{'med.':>4}  {_fmt_median(med['steps'], ',.0f', max_steps):>16} {_fmt_median(med['wall'], '.1f'):>11} "
          f"{med['total']:>12.1f}  "
          + (f"{_fmt_median(pmed['steps'], ',.0f', max_steps):>16} {_fmt_median(pmed['wall'], '.1f'):>10} "
             f"{pmed['total']:>11.1f}  {_ratio(pmed['wall'], med['wall'], '.2f', 'x'):>13} "
             f"{_ratio(med['steps'], pmed['steps'], '.2f'):>14}" if pmed else
             f"{'-':>16} {'-':>10} {'-':>11}  {'-':>13} {'-':>14}"))
    if sb3 and spec.zoo.get("train_freq", 1) > 1:
        print("SB3's steps if the rule were checked at every episode end (inside a round, finer than ours): "
              + ", ".join(f"seed {s}: {'-' if p['episode_steps'] is None else format(p['episode_steps'], ',')}"
                          for s, p in zip(seeds, peers)))
    n_ours = sum(r["steps"] is not None for r in ours)
    print(f"ours solved {n_ours}/{len(seeds)} seeds within {max_steps:,} env steps (acceptance: every seed)"
          + (f"; SB3 solved {sum(r['steps'] is not None for r in peers)}/{len(seeds)}" if sb3 else ""))
    if sb3:
        print(f"median env steps to the rule, ours / SB3: {_ratio(med['steps'], pmed['steps'], '.2f')} "
              f"(acceptance: <= 1); median wall time to the rule, SB3 / ours: "
              f"{_ratio(pmed['wall'], med['wall'], '.2f', 'x')} (acceptance: > 1)")
        print(_paired_steps(ours, peers))
