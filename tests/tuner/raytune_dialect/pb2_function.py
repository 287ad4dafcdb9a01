"""Synchronous PB2 over a function trainable that checkpoints every step: at every perturbation
point the trial of the bottom quantile goes on from the top trial's checkpoint, with an lr that
PB2's GP bandit chose within the bounds."""

import json
import os
import sys
import tempfile

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner
from schedulers.pb2 import PB2

STEPS = 12


def train(config):
    """Accuracy grows fastest at lr = 0.6; the model (its accuracy) is what a checkpoint keeps."""
    step, accuracy = 0, 0.0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json")) as f:
                state = json.load(f)
        step, accuracy = state["step"] + 1, state["accuracy"]
    while step < STEPS:
        accuracy += 1.0 - 4.0 * (config["lr"] - 0.6) ** 2
        with tempfile.TemporaryDirectory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
                json.dump({"step": step, "accuracy": accuracy}, f)
            tune.report({"mean_accuracy": accuracy, "lr": config["lr"]},
                        checkpoint=tune.Checkpoint.from_directory(checkpoint_dir))
        step += 1


if __name__ == "__main__":
    pb2 = PB2(
        time_attr="training_iteration",
        metric="mean_accuracy",
        mode="max",
        perturbation_interval=4,
        hyperparam_bounds={"lr": [0.0, 1.0]},
        synch=True,
    )
    tuner = Tuner(
        tune.with_resources(train, {"cpu": 0.5}),
        param_space={"lr": tune.grid_search([0.05, 0.1, 0.2, 0.3]), "momentum": 0.9},
        tune_config=TuneConfig(scheduler=pb2, max_concurrent_trials=4),
        run_config=RunConfig(name="pb2_function", storage_path=sys.argv[1]),
    )
    results = tuner.fit()
    best = results.get_best_result(metric="mean_accuracy", mode="max")
    print("best config:", best.config, "mean_accuracy:", best.metrics["mean_accuracy"])
    assert len(results) == 4 and not results.errors, results.errors
    # lr = 0.3, the best start, alone would reach 0.64 per step
    assert best.metrics["mean_accuracy"] >= 0.64 * STEPS - 1e-6
