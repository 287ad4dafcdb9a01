"""ASHA stops the poor trials and Ray Tune's ResourceChangingScheduler gives their CPUs to the
survivors: a class Trainable is paused at a checkpoint and restarted with its new resources."""

import sys
import time

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner
from schedulers import ASHAScheduler
from schedulers.resource_changing import DistributeResources, ResourceChangingScheduler


class Quadratic(tune.Trainable):
    def setup(self, config):
        self.x = 0.0

    def step(self):
        time.sleep(0.2)  # the work of one iteration
        self.x += self.config["lr"] * (3.0 - self.x)
        cpus = self.trial_resources.required_resources.get("CPU", 0)
        return {"loss": (3.0 - self.x) ** 2, "cpus": cpus}

    def save_checkpoint(self, checkpoint_dir):
        return {"x": self.x}

    def load_checkpoint(self, checkpoint):
        self.x = checkpoint["x"]


if __name__ == "__main__":
    scheduler = ResourceChangingScheduler(
        base_scheduler=ASHAScheduler(max_t=20, grace_period=2, reduction_factor=2),
        resources_allocation_function=DistributeResources(increase_by={"CPU": 0.5}),
    )
    tuner = Tuner(
        tune.with_resources(Quadratic, {"cpu": 0.5}),
        param_space={"lr": tune.grid_search([0.9, 0.5, 0.1, 0.05])},
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler),
        run_config=RunConfig(name="resource_changing", storage_path=sys.argv[1], stop={"training_iteration": 20}),
    )
    results = tuner.fit()
    df = results.get_dataframe()
    print(df[["loss", "cpus", "training_iteration", "config/lr"]])
    best = results.get_best_result()
    print("best lr:", best.config["lr"], "CPUs at the end:", best.metrics["cpus"])
    assert best.config["lr"] == 0.9 and not results.errors
