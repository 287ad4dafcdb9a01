"""A trainable whose final score is its config's quality plus seed noise, for validation tests."""

from __future__ import annotations

import numpy as np

from tuner import tune


def noisy(config):
    """Scores ``x`` plus noise drawn from the trial's seed: the sweep's best trial may be a lucky draw."""
    rng = np.random.default_rng(config["seed"])
    for _ in range(config.get("iterations", 2)):
        tune.report({"score": config["x"] + float(rng.normal(0.0, config.get("noise", 0.3)))})
