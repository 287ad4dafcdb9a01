"""PAUSE frees a trial's resources; the paused trial resumes later from its checkpoint."""

from __future__ import annotations

import json
import os
import time

import pytest

from schedulers import PAUSED, PENDING, FIFOScheduler
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


class Walker(tune.Trainable):
    """Adds config['inc'] per step; its state lives in a checkpoint file."""

    def setup(self, config):
        self.value = 0
        self.pid = os.getpid()

    def step(self):
        time.sleep(0.05)
        self.value += self.config["inc"]
        return {"value": self.value, "at": time.time(), "done": self.iteration + 1 >= 6}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
            json.dump({"value": self.value}, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "state.json")) as f:
            self.value = json.load(f)["value"]


class PauseFirstTrialOnce(FIFOScheduler):
    """Pauses the first trial at iteration 3 and resumes it only when every other trial ended."""

    never_pauses = False

    def __init__(self):
        super().__init__()
        self.paused_once = False

    def on_trial_result(self, controller, trial, result):
        if not self.paused_once and result["training_iteration"] == 3:
            self.paused_once = True
            return self.PAUSE
        return self.CONTINUE

    def choose_trial_to_run(self, controller):
        trials = controller.get_trials()
        for trial in trials:
            if trial.status == PENDING:
                return trial
        if all(t.status not in ("RUNNING", PENDING) for t in trials):
            for trial in trials:
                if trial.status == PAUSED:
                    return trial
        return None


def test_pause_frees_resources_and_resumes_from_checkpoint(tmp_path):
    analysis = tune.run(
        Walker,
        config={"inc": tune.grid_search([1, 10])},
        scheduler=PauseFirstTrialOnce(),
        resources_per_trial={"cpu": 2},  # one trial at a time on this 2-CPU Ray
        storage_path=str(tmp_path),
        name="pause",
        verbose=0,
    )
    first, second = sorted(analysis.trials, key=lambda t: t.index)
    assert first.status == second.status == "TERMINATED"
    curve = analysis.trial_dataframes[first.trial_id]
    assert list(curve["training_iteration"]) == [1, 2, 3, 4, 5, 6]
    assert list(curve["value"]) == [1, 2, 3, 4, 5, 6]  # resumed from the value checkpointed at 3
    other = analysis.trial_dataframes[second.trial_id]
    # While the first trial was paused, the second one (which needs every CPU) ran in between.
    assert curve["at"].iloc[2] < other["at"].iloc[0] and other["at"].iloc[-1] < curve["at"].iloc[3]
    assert os.path.basename(os.path.dirname(first.checkpoint_path)).startswith("Walker_")
