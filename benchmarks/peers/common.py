"""What every system of ``benchmarks/slow_sim.py`` shares: the workload, the simulator, the outcome;
and what ``benchmarks/sweep_race.py`` takes from it too: the PPO objective, ``ray_init``, ``spread``.

This module is imported by the simulator's own processes (SB3's SubprocVecEnv workers, RLlib's
env runners), so it imports nothing heavy at module level.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: The PPO objective and network every system runs (slow_sim's trials add lr and seed; the race's
#: trials set gamma and the entropy coefficient too, see race.py).
GAMMA = 0.99
GAE_LAMBDA = 0.95
CLIP = 0.2
VF_COEF = 0.5
ENTROPY_COEF = 0.0
MAX_GRAD_NORM = 0.5
HIDDEN = [64, 64]
MAX_EPISODE_STEPS = 500  # CartPole-v1's time limit


@dataclasses.dataclass(frozen=True)
class Workload:
    """The sweep every system runs: the trials (lr x seed), their PPO settings and the resources."""

    lrs: tuple[float, ...]
    seeds: tuple[int, ...]
    envs: int  # envs per trial, each in its own process
    steps: int  # env steps per trial: a trial stops at its first iteration boundary at or past it
    concurrency: int  # trials at once
    rollout: int  # steps of each env per update: train batch = rollout x envs
    minibatch: int
    epochs: int
    fast_ms: float
    slow_ms: float
    slow_prob: float
    cpus_per_env: float  # told to Ray per rollout actor / env runner
    learner_cpus: float  # told to Ray per trial's learner (ours: the trial actor; RLlib: the algorithm)
    ray_cpus: float  # told to Ray (both Ray systems)
    env_threads: int = 1  # ours: envs per rollout actor, each streaming in a thread (1: a process per env)

    @property
    def configs(self) -> list[tuple[float, int]]:
        """(lr, seed) of every trial, in the order the systems start them (lr varies fastest,
        the grid order of Ray Tune and ours)."""
        return [(lr, seed) for seed in self.seeds for lr in self.lrs]

    @property
    def trials(self) -> int:
        return len(self.lrs) * len(self.seeds)

    @property
    def batch(self) -> int:
        return self.rollout * self.envs

    @property
    def trial_cpus(self) -> float:
        return self.envs * self.cpus_per_env + self.learner_cpus

    @property
    def env_config(self) -> dict[str, float]:
        return {"fast_ms": self.fast_ms, "slow_ms": self.slow_ms, "slow_prob": self.slow_prob}

    @property
    def steps_per_trial(self) -> int:
        """Where a trial stops: the first whole batch at or past ``steps``."""
        return math.ceil(self.steps / self.batch) * self.batch


Curve = list[tuple[int, float]]  # (env steps at an iteration boundary, 100-episode mean return there)


@dataclasses.dataclass
class Outcome:
    """One system's sweep: its wall time and, per trial config (lr, seed), its learning curve."""

    system: str
    sweep_s: float
    env_steps: int
    curves: dict[tuple[float, int], Curve]
    ray_start_s: float | None = None  # inside sweep_s
    note: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / max(self.sweep_s, 1e-9)

    def final_steps(self) -> list[int]:
        return [curve[-1][0] for curve in self.curves.values() if curve]

    def return_at(self, steps: int) -> float:
        """The mean over trials of :meth:`return_of` (NaN where no trial has a value there)."""
        values = [v for v in (self.return_of(config, steps) for config in self.curves) if not math.isnan(v)]
        return sum(values) / len(values) if values else math.nan

    def return_of(self, config: tuple[float, int], steps: int) -> float:
        """The trial's 100-episode mean return at ``steps`` env steps: interpolated linearly between
        the iteration boundaries around it (its curve holds values at the boundaries only, and the
        systems' boundaries differ: ours count env steps that are transitions, a reset is none)."""
        points = [(s, r) for s, r in self.curves.get(config, []) if not math.isnan(r)]
        for (s0, r0), (s1, r1) in zip(points, points[1:]):
            if s0 <= steps <= s1:
                return r0 + (r1 - r0) * (steps - s0) / max(s1 - s0, 1)
        exact = [r for s, r in points if s == steps]
        return exact[0] if exact else math.nan


def mean_last_100(returns: list[float]) -> float:
    """The mean of the last 100 episode returns (SB3's ``ep_info_buffer``, our trainers' window)."""
    tail = returns[-100:]
    return sum(tail) / len(tail) if tail else math.nan


def ray_init(cpus: float) -> float:
    """Start Ray with ``cpus`` CPUs, as both Ray systems do (or join the Ray ``$RAY_ADDRESS``
    names, as the smoke test does); returns the seconds it took."""
    import ray

    from benchmarks.loopback import loopback_only

    loopback_only()
    start = time.perf_counter()
    if os.environ.get("RAY_ADDRESS"):
        ray.init(logging_level=logging.WARNING)
    else:
        # "local": a new instance even when another Ray on this machine is advertised in
        # /tmp/ray/ray_current_cluster (address=None would join that one, or fail on num_cpus).
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    return time.perf_counter() - start


# -- the simulator, without importing the ``algorithms`` package ---------------------------------
_ENV_MODULE = "_slow_sim_envs"


def _slow_cartpole_class() -> type:
    """``algorithms.envs.builtin.SlowCartPole``, loaded from its file alone: importing the package would
    import torch and Ray into every simulator process of SB3 (seconds each, at every trial start),
    a cost no SB3 user has."""
    module = sys.modules.get(_ENV_MODULE)
    if module is None:
        spec = importlib.util.spec_from_file_location(_ENV_MODULE, ROOT / "algorithms" / "envs" / "builtin.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[_ENV_MODULE] = module
        spec.loader.exec_module(module)
    return module.SlowCartPole


def make_slow_cartpole(**env_config: Any) -> Any:
    """``tuner/SlowCartPole-v1`` as ``gym.make`` builds it: the env behind CartPole-v1's time limit."""
    from gymnasium.wrappers import TimeLimit

    return TimeLimit(_slow_cartpole_class()(**env_config), max_episode_steps=MAX_EPISODE_STEPS)


def spread(values: list[float], fmt: str) -> str:
    """The median of ``values`` with their [min-max] (NaNs left out), as the benchmarks' tables print repeats."""
    import statistics

    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "-"
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def systems_in_turn(systems: list[str], rotate: int, peers: dict[str, tuple[str, list[str], Any]]) -> Any:
    """Each of ``systems`` in turn, starting with the ``rotate``-th (so that repeats start with
    the next one), as ``(key, 1-minute load average)``; a peer (``peers[key]``: label, packages,
    module) whose packages are missing is skipped with one line."""
    import importlib.util

    shift = rotate % len(systems)
    for key in systems[shift:] + systems[:shift]:
        if key in peers:
            label, packages, _module = peers[key]
            missing = [m for m in packages if importlib.util.find_spec(m) is None]
            if missing:
                print(f"{label}: skipped, {', '.join(missing)} not installed (pip install -e '.[bench]')")
                continue
        load = os.getloadavg()[0]  # the machine may be shared: say how busy it was
        print(f"running {key} (1-minute load average {load:.1f}) ...", file=sys.stderr, flush=True)
        yield key, load


def ppo_keys_from_sb3(hp: dict[str, Any]) -> dict[str, Any]:
    """Our PPO's keys for SB3 PPO hyperparameters (rl-zoo's names, constant schedules): the batch
    shape, the objective and the optimiser step. SB3's value loss is ``vf_coef * mse``, ours
    ``vf_loss_coeff * 0.5 * mse``."""
    return {
        "train_batch_size": hp["n_envs"] * hp["n_steps"],
        "minibatch_size": hp["batch_size"],
        "num_epochs": hp["n_epochs"],
        "lr": hp["learning_rate"],
        "lr_schedule": "constant",
        "gamma": hp["gamma"],
        "lambda_": hp["gae_lambda"],
        "clip_param": hp["clip_range"],
        "vf_clip_param": hp.get("clip_range_vf"),
        "vf_loss_coeff": 2 * hp["vf_coef"],
        "entropy_coeff": hp["ent_coef"],
        "max_grad_norm": hp["max_grad_norm"],
        "normalize_advantages": hp["normalize_advantage"],
    }


def int_list(parser: Any, flag: str, text: str, minimum: int = 0) -> list[int]:
    """``text`` as comma-separated ints >= ``minimum``, or the parser's one-line error naming ``flag``."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        parser.error(f"{flag}: comma-separated ints, got {text!r}")
    if any(value < minimum for value in values):
        parser.error(f"{flag}: every value must be >= {minimum}, got {text!r}")
    return values


def positive(parser: Any, flag: str, value: float) -> None:
    """The parser's one-line error naming ``flag`` unless ``value`` > 0."""
    if not value > 0:
        parser.error(f"{flag}: must be > 0, got {value!r}")


@contextlib.contextmanager
def compute_threads(threads: int) -> Iterator[None]:
    """torch and numpy's BLAS on ``threads`` threads inside, as they were after (a caller in this
    process, a smoke test, goes on with its own)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)
