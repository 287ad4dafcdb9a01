"""A sweep that continues where it was interrupted: run it, interrupt it (Ctrl-C), run it again."""

import json
import os
import sys
import tempfile
import time

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner

STEPS = 10


def train(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json")) as f:
                start = json.load(f)["step"] + 1
    for step in range(start, STEPS):
        time.sleep(0.25)
        with tempfile.TemporaryDirectory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report(
                {"score": config["x"] * (step + 1), "resumed_from": start},
                checkpoint=tune.Checkpoint.from_directory(checkpoint_dir),
            )


if __name__ == "__main__":
    storage_path = sys.argv[1]
    path = os.path.join(storage_path, "restore_demo")
    if Tuner.can_restore(path):
        tuner = Tuner.restore(path, trainable=train, resume_errored=True)
    else:
        tuner = Tuner(
            train,
            param_space={"x": tune.grid_search([1, 2, 3, 4])},
            tune_config=TuneConfig(metric="score", mode="max", max_concurrent_trials=2),
            run_config=RunConfig(name="restore_demo", storage_path=storage_path),
        )
    results = tuner.fit()
    print("trials:", len(results), "errors:", results.num_errors, "best:", results.get_best_result().config)
