"""ASHA stops the poor trials and Ray Tune's ResourceChangingScheduler gives their CPUs to the
survivors: a class Trainable is paused at a checkpoint and restarted with its new resources."""

import sys
import time
from pathlib import Path

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner
from schedulers import ASHAScheduler
from schedulers.resource_changing import DistributeResources, ResourceChangingScheduler


LRS = [0.9, 0.5, 0.1, 0.05]
GRACE = 2


class Quadratic(tune.Trainable):
    def setup(self, config):
        self.x = 0.0
        self.steps = Path(config["steps"])

    def step(self):
        # Up to ASHA's first rung, each trial steps after the one before it in the grid, so the
        # rung sees the best first on any machine (a loaded one starts actors seconds apart).
        rank, n = LRS.index(self.config["lr"]), self.iteration + 1
        before = self.steps / f"{rank - 1}-{n}"
        deadline = time.monotonic() + 120
        while n <= GRACE and rank > 0 and not before.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the work of one iteration
        (self.steps / f"{rank}-{n}").touch()
        self.x += self.config["lr"] * (3.0 - self.x)
        cpus = self.trial_resources.required_resources.get("CPU", 0)
        return {"loss": (3.0 - self.x) ** 2, "cpus": cpus}

    def save_checkpoint(self, checkpoint_dir):
        return {"x": self.x}

    def load_checkpoint(self, checkpoint):
        self.x = checkpoint["x"]


if __name__ == "__main__":
    steps = Path(sys.argv[1]) / "steps"
    steps.mkdir(parents=True, exist_ok=True)
    scheduler = ResourceChangingScheduler(
        base_scheduler=ASHAScheduler(max_t=20, grace_period=GRACE, reduction_factor=2),
        resources_allocation_function=DistributeResources(increase_by={"CPU": 0.5}),
    )
    tuner = Tuner(
        tune.with_resources(Quadratic, {"cpu": 0.5}),
        param_space={"lr": tune.grid_search(LRS), "steps": str(steps)},
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler),
        run_config=RunConfig(name="resource_changing", storage_path=sys.argv[1], stop={"training_iteration": 20}),
    )
    results = tuner.fit()
    df = results.get_dataframe()
    print(df[["loss", "cpus", "training_iteration", "config/lr"]])
    best = results.get_best_result()
    print("best lr:", best.config["lr"], "CPUs at the end:", best.metrics["cpus"])
    assert best.config["lr"] == 0.9 and not results.errors
