"""A class Trainable with its own checkpoints, large data passed with with_parameters, resources with with_resources."""

import json
import os
import sys

import numpy as np

from tuner import tune
from tuner.tune import CheckpointConfig, RunConfig, TuneConfig, Tuner


class Quadratic(tune.Trainable):
    def setup(self, config, data=None):
        self.target = float(data.mean())
        self.x = 0.0

    def step(self):
        self.x += self.config["lr"] * (self.target - self.x)
        return {"loss": (self.target - self.x) ** 2, "x": self.x}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "x.json"), "w") as f:
            json.dump({"x": self.x}, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "x.json")) as f:
            self.x = json.load(f)["x"]


if __name__ == "__main__":
    data = np.full(100_000, 3.0)
    trainable = tune.with_resources(tune.with_parameters(Quadratic, data=data), {"cpu": 0.5})
    tuner = Tuner(
        trainable,
        param_space={"lr": tune.grid_search([0.1, 0.5, 0.9])},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(
            name="class_trainable",
            storage_path=sys.argv[1],
            stop={"training_iteration": 6},
            checkpoint_config=CheckpointConfig(checkpoint_frequency=2, checkpoint_at_end=True),
        ),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print("best lr:", best.config["lr"], "x:", best.metrics["x"], "checkpoints:", len(best.best_checkpoints))
    assert best.config["lr"] == 0.9 and abs(best.metrics["x"] - 3.0) < 1e-3
    assert len(results.get_dataframe()) == 3
