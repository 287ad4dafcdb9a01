"""Replaying a PBT schedule: a policy file as Ray Tune's PBT logs it, one new trial that follows it."""

import json
import os
import sys

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner
from schedulers import PopulationBasedTrainingReplay


class Model(tune.Trainable):
    """Its weights are the learning rates of the steps it took (so the replay can be checked)."""

    def setup(self, config):
        self.steps = []

    def step(self):
        self.steps.append(self.config["lr"])
        return {"lr": self.config["lr"], "steps_trained": len(self.steps)}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "steps.json"), "w") as f:
            json.dump(self.steps, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "steps.json")) as f:
            self.steps = json.load(f)


if __name__ == "__main__":
    storage = sys.argv[1]
    os.makedirs(storage, exist_ok=True)
    # Trial 2 took trial 1's weights at step 6, which trial 1 had taken from trial 0 at step 3.
    # Each line: [trial, donor, trial's step, donor's step, donor's config, new config].
    policy_file = os.path.join(storage, "pbt_policy_demo_00002.txt")
    with open(policy_file, "w") as f:
        print(json.dumps(["1_lr=0.1", "0_lr=0.01", 3, 3, {"lr": 0.01}, {"lr": 0.012}]), file=f)
        print(json.dumps(["2_lr=0.001", "1_lr=0.1", 6, 6, {"lr": 0.012}, {"lr": 0.0096}]), file=f)

    tuner = Tuner(
        tune.with_resources(Model, {"cpu": 0.5}),
        tune_config=TuneConfig(scheduler=PopulationBasedTrainingReplay(policy_file)),
        run_config=RunConfig(name="pbt_replay", storage_path=storage, stop={"training_iteration": 9}),
    )
    results = tuner.fit()
    (result,) = results
    df = result.metrics_dataframe
    print(df[["training_iteration", "lr", "steps_trained"]])
    assert list(df["lr"]) == [0.01] * 3 + [0.012] * 3 + [0.0096] * 3
    assert list(df["steps_trained"]) == list(range(1, 10)) and result.config == {"lr": 0.0096}
