"""Synthetic learning curves and scheduler factories shared by the scheduler tests."""

from __future__ import annotations

import math
import random
from typing import Any, Callable

from schedulers import (
    ASHAScheduler,
    DistributeResources,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PB2,
    PopulationBasedTraining,
    ResourceChangingScheduler,
)

LENGTH = 27


class FakeDomain:
    """Duck-typed like tuner.search.space.Float: ``sample(rng)`` and ``lower``/``upper``."""

    def __init__(self, lower: float, upper: float) -> None:
        self.lower, self.upper = lower, upper

    def sample(self, rng, spec=None) -> float:
        return float(rng.uniform(self.lower, self.upper))


def make_configs(n: int = 12, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    configs = []
    for i in range(n):
        configs.append(
            {
                "id": i,
                "lr": round(rng.uniform(0.01, 0.5), 4),
                "width": rng.choice([8, 16, 32, 64]),
                "momentum": rng.choice([0.0, 0.5, 0.9]),
            }
        )
    configs[-1] = dict(configs[-2], id=len(configs) - 1)  # two identical curves: ties
    return configs


def curve_fn(config: dict[str, Any], t: int) -> float:
    """Crossing, non-monotonic curves: fast starters are not always the best finishers."""
    quality = 1.0 - abs(math.log(config["lr"] / 0.1)) / 3 + math.log2(config["width"]) / 20
    speed = 2.0 + 10.0 * config["momentum"]
    wobble = 0.02 * math.sin(3.0 * t + 7.0 * config["lr"] + config["width"])
    return quality * (1.0 - math.exp(-t / speed)) + wobble


def negated(fn: Callable[[dict, int], float]) -> Callable[[dict, int], float]:
    return lambda config, t: -fn(config, t)


PBT_MUTATIONS: dict[str, Any] = {
    "lr": FakeDomain(0.01, 0.5),
    "width": [8, 16, 32, 64],
    "momentum": lambda: 0.5,
}

PB2_BOUNDS: dict[str, Any] = {"lr": [0.01, 0.5], "momentum": [0.0, 0.9]}

#: name -> factory of a fresh scheduler (metric/mode come from the simulation).
SCHEDULERS: dict[str, Callable[[], Any]] = {
    "fifo": lambda: FIFOScheduler(),
    "asha": lambda: ASHAScheduler(max_t=LENGTH, grace_period=1, reduction_factor=3),
    "asha_brackets": lambda: ASHAScheduler(max_t=LENGTH, grace_period=1, reduction_factor=3, brackets=3, seed=7),
    "asha_run_past_max_t": lambda: ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3, stop_last_trials=False),
    "asha_promotion": lambda: ASHAScheduler(max_t=LENGTH, grace_period=1, reduction_factor=3, promotion=True),
    "hyperband": lambda: HyperBandScheduler(max_t=LENGTH, reduction_factor=3),
    "hyperband_run_past_max_t": lambda: HyperBandScheduler(max_t=9, reduction_factor=3, stop_last_trials=False),
    "median": lambda: MedianStoppingRule(time_attr="training_iteration", grace_period=3),
    "median_soft": lambda: MedianStoppingRule(
        time_attr="training_iteration", grace_period=3, min_time_slice=2, hard_stop=False
    ),
    "pbt": lambda: PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=4,
        burn_in_period=2,
        hyperparam_mutations=PBT_MUTATIONS,
        seed=3,
    ),
    "pbt_synch": lambda: PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=5,
        hyperparam_mutations=PBT_MUTATIONS,
        quantile_fraction=0.5,
        resample_probability=0.5,
        synch=True,
        seed=3,
    ),
    # the simulator changes no resources: every decision must be the wrapped ASHA's
    "resource_changing_asha": lambda: ResourceChangingScheduler(
        ASHAScheduler(max_t=LENGTH, grace_period=1, reduction_factor=3), DistributeResources(add_bundles=True)
    ),
    # Few perturbation points: each PB2 exploit fits a GP (tens of milliseconds).
    "pb2": lambda: PB2(
        time_attr="training_iteration",
        perturbation_interval=8,
        hyperparam_bounds=PB2_BOUNDS,
        seed=3,
    ),
    "pb2_synch": lambda: PB2(
        time_attr="training_iteration",
        perturbation_interval=9,
        hyperparam_bounds=PB2_BOUNDS,
        synch=True,
        seed=3,
    ),
}


# -- a bandit problem for PB2: two hyperparameters, the best known, the model carries its score ----------

BANDIT_BOUNDS: dict[str, list[float]] = {"lr": [0.0, 1.0], "clip": [0.1, 0.5]}
OPTIMUM = {"lr": 0.7, "clip": 0.2}


def gain(config: dict[str, Any]) -> float:
    """The score's growth per step: 1 at the optimum, less away from it."""
    return 1.0 - 2.0 * (config["lr"] - OPTIMUM["lr"]) ** 2 - 10.0 * (config["clip"] - OPTIMUM["clip"]) ** 2


def distance_to_optimum(config: dict[str, Any]) -> float:
    """Distance to the optimum, each hyperparameter scaled by the width of its bounds."""
    return math.hypot(config["lr"] - OPTIMUM["lr"], (config["clip"] - OPTIMUM["clip"]) / 0.4)


def noisy_curves(seed: int, noise: float = 0.1) -> Callable[[dict, int, float | None], float]:
    """For ``simulate(..., carry=True)``: each step adds the config's gain and Gaussian noise."""
    rng = random.Random(seed)
    return lambda config, t, previous: (previous or 0.0) + gain(config) + rng.gauss(0, noise)


def initial_configs(seed: int, n: int) -> list[dict[str, Any]]:
    """Every initial config far from the optimum (lr <= 0.4, clip >= 0.3): it has to be found."""
    rng = random.Random(1000 + seed)
    return [{"lr": rng.uniform(0.05, 0.4), "clip": rng.uniform(0.3, 0.5), "other": "kept"} for _ in range(n)]
