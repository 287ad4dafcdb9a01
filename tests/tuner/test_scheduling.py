"""Schedulers and searchers driving real trials through tune.run."""

from __future__ import annotations

import json
import os

import pytest

from schedulers import ASHAScheduler, PopulationBasedTraining
from tuner import tune
from tuner.search import OptunaSearch

pytestmark = pytest.mark.usefixtures("ray_session")


class MovingTarget(tune.Trainable):
    """Each step earns 1 - (h - target)^2 where the best h moves: target = 0.05 * t.

    A fixed h is good only for a while; PBT can follow the optimum by exploiting the
    best trials' accumulated score and perturbing h.
    """

    def setup(self, config):
        self.score = 0.0
        self.t = 0

    def step(self):
        self.t += 1
        target = 0.05 * self.t
        self.score += 1.0 - (self.config["h"] - target) ** 2
        return {"score": self.score, "h": self.config["h"]}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "s.json"), "w") as f:
            json.dump({"score": self.score, "t": self.t, "h": self.config["h"]}, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "s.json")) as f:
            state = json.load(f)
        self.score, self.t = state["score"], state["t"]


class MovingTargetInPlace(MovingTarget):
    def reset_config(self, new_config):
        self.config = dict(new_config)
        return True


def _run_population(tmp_path, name, trainable, scheduler):
    return tune.run(
        trainable,
        config={"h": tune.uniform(0.0, 0.3)},
        num_samples=4,
        metric="score",
        mode="max",
        scheduler=scheduler,
        stop={"training_iteration": 40},
        resources_per_trial={"cpu": 0.5},
        seed=3,
        storage_path=str(tmp_path),
        name=name,
        verbose=0,
    )


@pytest.mark.parametrize("trainable", [MovingTargetInPlace, MovingTarget], ids=["reset_config", "rebuild"])
def test_pbt_beats_the_same_population_without_it(tmp_path, trainable):
    without = _run_population(tmp_path, "fixed", trainable, None)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=4,
        hyperparam_mutations={"h": tune.uniform(0.0, 2.0)},
        quantile_fraction=0.25,
        resample_probability=0.0,
        synch=True,  # the population perturbs together: the outcome does not hang on timing
        seed=0,
    )
    with_pbt = _run_population(tmp_path, "pbt", trainable, pbt)
    best_without = max(t.last_result["score"] for t in without.trials)
    best_with = max(t.last_result["score"] for t in with_pbt.trials)
    assert best_with > best_without + 1.0, (best_with, best_without)

    lineage = with_pbt.exploits
    assert lineage, "PBT made no exploit"
    ids = {t.trial_id for t in with_pbt.trials}
    for row in lineage:
        assert row["trial_id"] in ids and row["donor_trial_id"] in ids
        assert row["trial_id"] != row["donor_trial_id"]
        # explored from the donor's h as it stood at the exploit (it may land on the exploiter's own)
        donor_rows = with_pbt.trial_dataframes[row["donor_trial_id"]]
        donor_h = float(donor_rows.loc[donor_rows["training_iteration"] == row["iteration"], "h"].iloc[0])
        assert row["new_config"]["h"] in (pytest.approx(donor_h * 0.8), pytest.approx(min(donor_h * 1.2, 2.0))), (
            row, donor_h)
        assert os.path.isdir(row["checkpoint_path"])
    # Every trial's stored curve is still one row per iteration, 1..40.
    for trial_id, frame in with_pbt.trial_dataframes.items():
        assert list(frame["training_iteration"]) == list(range(1, 41)), trial_id
    # The stored config of an exploited trial is the one its latest exploit gave it.
    last = lineage[-1]
    (trial,) = [t for t in with_pbt.trials if t.trial_id == last["trial_id"]]
    assert trial.config["h"] == pytest.approx(last["new_config"]["h"])


class Climb(tune.Trainable):
    """Earns ``h`` a step; reports its own step count ``t``, which an exploit takes from the donor."""

    def setup(self, config):
        self.score, self.t = 0.0, 0

    def step(self):
        self.t += 1
        self.score += self.config["h"]
        return {"score": self.score, "t": self.t, "h": self.config["h"]}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "s.json"), "w") as f:
            json.dump({"score": self.score, "t": self.t}, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "s.json")) as f:
            state = json.load(f)
        self.score, self.t = state["score"], state["t"]


def test_an_exploit_takes_the_donors_state_as_ranked_though_the_donor_runs_on_first(tmp_path):
    """Synchronous PBT, one trial at a time: after the first sync point the donor (added first,
    the best) resumes, runs to the next sync point and saves again before its exploiter (added
    last, the worst) starts. The
    exploiter must take the donor's checkpoint of the sync point it was ranked at, not the later
    one (its step count would run ahead of its iterations), and retention (one checkpoint kept)
    must not delete that checkpoint before it is taken."""
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=3,
        hyperparam_mutations={"h": [0.0, 1.0, 2.0, 3.0]},
        quantile_fraction=0.25,
        resample_probability=0.0,
        synch=True,
        seed=0,
    )
    analysis = tune.run(
        Climb,
        config={"h": tune.grid_search([3.0, 2.0, 1.0, 0.0])},
        metric="score",
        mode="max",
        scheduler=pbt,
        stop={"training_iteration": 9},
        resources_per_trial={"cpu": 2},  # the whole test cluster: one trial at a time
        keep_checkpoints_num=1,
        storage_path=str(tmp_path),
        name="climb",
        verbose=0,
    )
    first, last = analysis.trials[0].trial_id, analysis.trials[-1].trial_id
    assert (first, last) in {(row["donor_trial_id"], row["trial_id"]) for row in analysis.exploits}
    for trial_id, frame in analysis.trial_dataframes.items():
        assert list(frame["training_iteration"]) == list(range(1, 10)), trial_id
        assert list(frame["t"]) == list(range(1, 10)), trial_id  # the donor's state of that very iteration


def quadratic(config):
    for i in range(1, 10):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["y"] - 2) ** 2 + 1.0 / i})


def test_optuna_search_with_asha(tmp_path):
    searcher = OptunaSearch(seed=0)
    analysis = tune.run(
        quadratic,
        config={"x": tune.uniform(-2, 2), "y": tune.uniform(-5, 5)},
        num_samples=24,
        metric="loss",
        mode="min",
        search_alg=searcher,
        scheduler=ASHAScheduler(time_attr="training_iteration", max_t=9, grace_period=1, reduction_factor=3),
        resources_per_trial={"cpu": 0.5},
        storage_path=str(tmp_path),
        name="optuna_asha",
        verbose=0,
    )
    trials = analysis.trials
    assert len(trials) == 24
    lengths = [len(f) for f in analysis.trial_dataframes.values()]
    assert min(lengths) < 9 and max(lengths) == 9  # ASHA stopped some trials early, not all
    import optuna

    states = [t.state for t in searcher.study.trials]
    assert states.count(optuna.trial.TrialState.PRUNED) >= 1
    assert states.count(optuna.trial.TrialState.COMPLETE) >= 1
    # Every result of every trial was stored, and the best is a sensible point.
    assert sum(lengths) == len(analysis.results_df)
    best = analysis.best_config
    assert abs(best["x"] - 0.3) < 1.5 and abs(best["y"] - 2) < 3
