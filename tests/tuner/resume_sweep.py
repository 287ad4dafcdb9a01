"""A sweep that a test kills and resumes: importable by the driver subprocess and by workers."""

from __future__ import annotations

import json
import os
import sys
import time

from schedulers import ASHAScheduler, PopulationBasedTraining
from tuner import tune

ITERATIONS = 8


def train(config):
    """Reports a checkpoint every iteration; logs each start (and where it resumed from)."""
    ckpt = tune.get_checkpoint()
    start = 0
    if ckpt is not None:
        with open(os.path.join(ckpt.path, "i.json")) as f:
            start = json.load(f)["i"] + 1
    with open(config["log"], "a") as f:
        f.write(json.dumps({"trial": tune.get_context().get_trial_id(), "from": start, "t": time.time()}) + "\n")
    for i in range(start, ITERATIONS):
        time.sleep(0.15)
        d = os.path.join(tune.get_context().get_trial_dir(), f"tmp_{i}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "i.json"), "w") as f:
            json.dump({"i": i}, f)
        score = -((config["x"] - 0.7) ** 2) * (i + 1)
        tune.report({"score": score}, checkpoint=tune.Checkpoint.from_directory(d))


def sweep(storage: str, name: str, scheduler: str, log: str, resume: bool = False):
    sched = None
    if scheduler == "asha":
        sched = ASHAScheduler(time_attr="training_iteration", max_t=ITERATIONS, grace_period=2, reduction_factor=2)
    elif scheduler == "pbt":
        sched = PopulationBasedTraining(
            time_attr="training_iteration", perturbation_interval=2, hyperparam_mutations={"x": tune.uniform(0, 1)},
            quantile_fraction=0.34, seed=0,
        )
    return tune.run(
        train,
        config={"x": tune.uniform(0, 1), "log": log},
        num_samples=8,
        metric="score",
        mode="max",
        scheduler=sched,
        resources_per_trial={"cpu": 0.5},
        max_concurrent_trials=3,
        max_failures=2,  # an actor lost while Ray cleans up after the killed driver is retried
        seed=11,
        storage_path=storage,
        name=name,
        verbose=0,
        resume=resume,
    )


if __name__ == "__main__":
    sweep(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4])
