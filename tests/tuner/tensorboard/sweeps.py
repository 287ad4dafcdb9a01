"""Trainables and a scheduler of the TensorBoard export tests (importable by Ray workers)."""

from __future__ import annotations

import os
import time

from schedulers import FIFOScheduler, TrialScheduler
from tuner import tune

ITERATIONS = 4

#: The search space of the main sweep: grid, choice, uniform, loguniform, randint, nested dicts,
#: constants (a number and a list).
SPACE = {
    "lr": tune.loguniform(1e-4, 1e-1),
    "g": tune.grid_search([1, 2, 3]),
    "act": tune.choice(["relu", "tanh"]),
    "model": {"w": tune.uniform(0, 1), "depth": tune.randint(1, 4), "hidden": [32, 32]},
    "sleep": 0.25,
}


def train(config):
    """g=1 runs 4 iterations, g=2 is stopped by :class:`StopG2` after 2, g=3 fails at its second.

    Each result holds a number, a nested dict, a bool, a text, and a value that is None once."""
    for i in range(1, ITERATIONS + 1):
        time.sleep(config["sleep"])
        if config["g"] == 3 and i == 2:
            raise RuntimeError("g=3 fails on purpose")
        tune.report({
            "score": config["model"]["w"] * i + config["g"],
            "loss": 1.0 / i,
            "info": {"kl": 0.1 * i},
            "ok": i % 2 == 0,
            "note": f"iteration {i}",
            "maybe": None if i == 2 else float(i),
        })


class StopG2(FIFOScheduler):
    """Stops the trials with g=2 at their second result (a scheduler's STOP: a success)."""

    def on_trial_result(self, controller, trial, result):
        if trial.config["g"] == 2 and result["training_iteration"] >= 2:
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE


def train_flaky(config):
    """x=1 fails at its second iteration the first time (a marker file remembers), then succeeds."""
    for i in range(1, 4):
        if config["x"] == 1 and i == 2 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("first attempt fails")
        tune.report({"score": config["x"] * 10 + i})


def train_quick(config):
    tune.report({"score": config["x"]})
