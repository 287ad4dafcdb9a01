"""What every system of ``benchmarks/sweep_race.py`` shares: the space, the trial list, the outcome.

The PPO objective and network outside the space are common.py's (GAE lambda, clip, value-loss
coefficient, gradient norm, separate 64x64 tanh nets); each trial sets lr, gamma, the entropy
coefficient, the batch, the epochs and the minibatch. Imports nothing heavy at module level: the
Optuna workers import it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

TARGET = 475.0  # "solved": the mean return of the trial's last 100 episodes
LR = (1e-4, 3e-3)  # log-uniform
GAMMAS = (0.98, 0.99, 0.995)
ENTROPIES = (0.0, 0.01)
BATCHES = (1024, 2048, 4096)
EPOCHS = (4, 10)
MINIBATCHES = (64, 256)
#: CartPole envs per trial, stepped as one vector env in the learner's process (ours'
#: num_envs_per_worker default, given explicitly so that every system gets the same).
ENVS = 16
#: The keys of a trial config, as ours names them (RLlib's batch key differs: see its peer).
KEYS = ("lr", "gamma", "entropy_coeff", "train_batch_size", "num_epochs", "minibatch_size")


@dataclasses.dataclass(frozen=True)
class Budget:
    trials: int = 16
    max_steps: int = 200_000
    grace: int = 20_000
    reduction_factor: int = 3
    seed: int = 0  # draws the shared list (and seeds the searchers of --search own)
    cpus: int = 1  # trials at once: one CPU each, every system


@dataclasses.dataclass
class Outcome:
    system: str
    first_solve_s: float | None
    sweep_s: float
    solved: int
    trials: int
    env_steps: int
    note: str = ""


def draw_trials(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` trial configs (``KEYS`` plus a PPO ``seed``), drawn from ``seed`` alone: every
    system of the shared mode runs this list, in this order. The PPO seeds are distinct, so a
    trial is known by its seed (ours and Ray Tune grid over it)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    seeds = rng.choice(100_000, size=count, replace=False)
    pick = lambda values: values[int(rng.integers(len(values)))]  # noqa: E731
    return [{"lr": float(math.exp(rng.uniform(math.log(LR[0]), math.log(LR[1])))), "gamma": pick(GAMMAS),
             "entropy_coeff": pick(ENTROPIES), "train_batch_size": pick(BATCHES), "num_epochs": pick(EPOCHS),
             "minibatch_size": pick(MINIBATCHES), "seed": int(s)} for s in seeds]


def _pick(by_seed: dict[int, dict[str, Any]], key: str) -> Any:
    def value(spec: Any) -> Any:
        # ours passes a spec holding the config; Ray Tune the spec, or the config itself
        config = getattr(spec, "config", None)
        return by_seed[(spec if config is None else config)["seed"]][key]
    return value


def shared_domains(trials: list[dict[str, Any]], tune: Any, names: dict[str, str] | None = None) -> dict[str, Any]:
    """The list as a search space of ``tune`` (ours or Ray's: both resolve a grid before the
    ``sample_from`` functions that read it): a grid over the trials' seeds, in the list's order,
    and each other key looked up by the seed. ``names`` renames keys (ours -> the system's)."""
    by_seed = {t["seed"]: t for t in trials}
    names = names or {}
    return {"seed": tune.grid_search([t["seed"] for t in trials]),
            **{names.get(key, key): tune.sample_from(_pick(by_seed, key)) for key in KEYS}}
