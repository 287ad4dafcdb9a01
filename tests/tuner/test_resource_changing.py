"""ResourceChangingScheduler in a real sweep: ASHA stops trials, and their CPUs go to the survivors
as more rollout actors, in place (the survivors are never restarted)."""

from __future__ import annotations

import os
import time

import pytest

from algorithms import PPO
from schedulers import ASHAScheduler, DistributeResources, ResourceChangingScheduler
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")

#: 3 trials of 0.25 + 2 x 0.1 CPUs on the session's 2: the rest is reserved, so that only a stopped
#: trial's CPUs are there to give.
TRIAL_CPUS = 0.25 + 2 * 0.1
RESERVED = 2.0 - 3 * TRIAL_CPUS


def ranked_ppo(folder: str) -> type:
    """PPO whose score is minus the rank of its first result (the first trial to report is the
    best, so ASHA's first rung stops the others whatever order they start in), and whose second
    iteration waits until every trial has reported its first (so the rung is decided while the
    survivor still has iterations to grow in)."""

    class RankedPPO(PPO):
        def step(self):
            if self.iteration == 1:
                while len(os.listdir(folder)) < 3:
                    time.sleep(0.01)
            result = super().step()
            if self.iteration == 0:
                rank = 0
                while True:
                    try:
                        os.close(os.open(os.path.join(folder, str(rank)), os.O_CREAT | os.O_EXCL))
                        break
                    except FileExistsError:
                        rank += 1
                self.rank = rank
            result["score"] = -float(self.rank)
            return result

    return RankedPPO


def test_stopped_trials_cpus_become_the_survivors_rollout_actors(tmp_path):
    scheduler = ResourceChangingScheduler(
        ASHAScheduler(time_attr="training_iteration", grace_period=1, reduction_factor=3, max_t=5),
        # add_bundles left out, as in a Ray Tune script: trials of several bundles get more bundles
        DistributeResources(increase_by_times=2, reserve_resources={"CPU": RESERVED}),
    )
    folder = tmp_path / "ranks"
    folder.mkdir()
    analysis = tune.run(
        ranked_ppo(str(folder)),
        config={"env": "CartPole-v1", "num_workers": 2, "num_envs_per_worker": 2, "train_batch_size": 128,
                "minibatch_size": 64, "num_epochs": 1, "sample_async": True, "num_cpus_for_learner": 0.25,
                "num_cpus_per_worker": 0.1, "seed": tune.grid_search([2, 1, 0])},
        metric="score", mode="max", scheduler=scheduler,
        stop={"training_iteration": 5},
        storage_path=str(tmp_path), name="elastic", verbose=0,
    )
    frames = {t.config["seed"]: analysis.trial_dataframes[t.trial_id] for t in analysis.trials}
    ends = {seed: df["timestamp"].max() for seed, df in frames.items()}
    assert any(df["training_iteration"].max() < 5 for df in frames.values()), "ASHA stopped no trial"
    grown = [seed for seed, df in frames.items() if df["num_workers"].max() > 2]
    assert grown, {seed: list(df["num_workers"]) for seed, df in frames.items()}
    for seed in grown:
        df = frames[seed]
        assert df["num_workers"].iloc[0] == 2 and df["num_workers"].max() == 4  # increase_by_times=2
        first_grown = df.loc[df["num_workers"] > 2, "timestamp"].min()
        # the CPUs were free only once another trial had ended
        assert any(end < first_grown for other, end in ends.items() if other != seed)
        assert list(df["iterations_since_restore"]) == list(df["training_iteration"])  # in place, never restarted
        assert df["env_steps_total"].is_monotonic_increasing
    analysis.close()
