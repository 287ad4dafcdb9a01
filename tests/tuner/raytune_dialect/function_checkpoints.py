"""A function trainable that reports a checkpoint every step, fails once, and resumes from its checkpoint."""

import json
import os
import sys
import tempfile

from tuner import tune
from tuner.tune import CheckpointConfig, FailureConfig, RunConfig, TuneConfig, Tuner

STEPS = 8


def train(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json")) as f:
                start = json.load(f)["step"] + 1
    for step in range(start, STEPS):
        if config["lr"] == 0.1 and step == 4 and start == 0:
            raise RuntimeError("lost the GPU at step 4")  # retried from the step-3 checkpoint
        loss = (config["lr"] - 0.01) ** 2 + 1.0 / (step + 1)
        with tempfile.TemporaryDirectory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report({"loss": loss, "step": step}, checkpoint=tune.Checkpoint.from_directory(checkpoint_dir))


if __name__ == "__main__":
    tuner = Tuner(
        train,
        param_space={"lr": tune.grid_search([0.001, 0.01, 0.1])},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(
            name="function_checkpoints",
            storage_path=sys.argv[1],
            checkpoint_config=CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min"
            ),
            failure_config=FailureConfig(max_failures=1),
        ),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print("best config:", best.config, "loss:", best.metrics["loss"], "checkpoint:", best.checkpoint)
    assert not results.errors, results.errors
    assert best.config["lr"] == 0.01
