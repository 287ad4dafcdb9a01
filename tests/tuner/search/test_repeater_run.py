"""Repeater in real sweeps: groups of trials, the means Optuna is told, ASHA meanwhile, resume."""

from __future__ import annotations

import pytest
from optuna.trial import TrialState

from schedulers import ASHAScheduler
from tuner import tune
from tuner.search import TRIAL_INDEX, OptunaSearch, Repeater

pytestmark = pytest.mark.usefixtures("ray_session")

PENALTY = (0.0, -0.05, 0.5)  # by __trial_index__: the third repeat of each config does worst


def train(config):
    base = (config["x"] - 0.3) ** 2 + PENALTY[config[TRIAL_INDEX]]
    for step in range(1, 7):
        tune.report({"loss": base + 1.0 / step})


def _final_losses(analysis):
    return {t.trial_id: t.last_result["loss"] for t in analysis.trials}


def _groups(analysis, repeater):
    """The sweep's trials grouped as the repeater grouped them, each in index order."""
    by_id = {t.trial_id: t for t in analysis.trials}
    return [[by_id[tid] for tid in g["trials"]] for g in repeater.groups]


def _check_groups(analysis, repeater, count):
    groups = _groups(analysis, repeater)
    assert len(groups) == count and len(analysis.trials) == 3 * count
    for group in groups:
        assert [t.config[TRIAL_INDEX] for t in group] == [0, 1, 2]
        assert len({t.config["x"] for t in group}) == 1
    return groups


def test_optuna_is_told_exactly_each_groups_mean(tmp_path):
    repeater = Repeater(OptunaSearch(seed=0), repeat=3)
    analysis = tune.run(train, config={"x": tune.uniform(0, 1)}, search_alg=repeater, num_samples=9,
                        metric="loss", mode="min", max_concurrent_trials=2, resources_per_trial={"cpu": 0.5},
                        storage_path=str(tmp_path), name="repeat", verbose=0)
    groups = _check_groups(analysis, repeater, 3)
    final = _final_losses(analysis)
    study = repeater.searcher.study
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    for group, ot_trial in zip(groups, trials):
        mean = sum(final[t.trial_id] for t in group) / 3
        assert ot_trial.value == pytest.approx(mean)
        assert ot_trial.params["x"] == group[0].config["x"]
        assert mean == pytest.approx((group[0].config["x"] - 0.3) ** 2 + sum(PENALTY) / 3 + 1 / 6)


def test_asha_stops_single_repeats_and_the_searcher_is_told_what_they_reached(tmp_path):
    # One trial at a time, so ASHA sees the results in trial order and decides the same way each run.
    optuna = OptunaSearch(points_to_evaluate=[{"x": 0.3}, {"x": 2.0}], seed=0)
    repeater = Repeater(optuna, repeat=3)
    asha = ASHAScheduler(time_attr="training_iteration", max_t=6, grace_period=2, reduction_factor=2)
    analysis = tune.run(train, config={"x": tune.uniform(0, 3)}, search_alg=repeater, scheduler=asha,
                        num_samples=6, metric="loss", mode="min", max_concurrent_trials=1,
                        resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="asha", verbose=0)
    good, bad = _check_groups(analysis, repeater, 2)
    # x=0.3: the worst repeat is stopped at the first rung, the two others run to the end.
    assert [t.last_result["training_iteration"] for t in good] == [6, 6, 2]
    assert [t.last_result["training_iteration"] for t in bad] == [2, 2, 2]  # x=2.0: every repeat stopped
    complete, pruned = optuna.study.get_trials(deepcopy=False)
    assert complete.state == TrialState.COMPLETE
    assert complete.value == pytest.approx(sum(t.last_result["loss"] for t in good) / 3)
    assert pruned.state == TrialState.PRUNED  # stopped everywhere: pruned, with the mean where they stopped
    assert pruned.intermediate_values == {2: pytest.approx(sum(t.last_result["loss"] for t in bad) / 3)}


class InterruptAfter(tune.Callback):
    """Ctrl-C in the driver once ``count`` trials have completed."""

    def __init__(self, count):
        self.count = count
        self.seen = 0

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.seen += 1
        if self.seen == self.count:
            raise KeyboardInterrupt


def test_a_resumed_sweep_keeps_its_groups(tmp_path):
    def run(searcher, **kwargs):
        return tune.run(train, config={"x": tune.uniform(0, 1)}, search_alg=searcher, num_samples=9,
                        metric="loss", mode="min", max_concurrent_trials=2, resources_per_trial={"cpu": 0.5},
                        storage_path=str(tmp_path), name="resumed", verbose=0, **kwargs)

    first = Repeater(OptunaSearch(seed=1), repeat=3)
    with pytest.raises(KeyboardInterrupt):
        run(first, callbacks=[InterruptAfter(4)])  # in the middle of the second group
    assert len(first.groups) == 2 and not first.groups[1]["told"]  # 4 trials ended of the 5 or 6 started

    resumed = Repeater(OptunaSearch(seed=1), repeat=3)
    analysis = run(resumed, resume=True)
    assert [g["config"] for g in resumed.groups[:2]] == [g["config"] for g in first.groups]
    assert resumed.groups[0]["trials"] == first.groups[0]["trials"]
    groups = _check_groups(analysis, resumed, 3)
    final = _final_losses(analysis)
    trials = resumed.searcher.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3  # no group lost, none told twice
    for group, ot_trial in zip(groups, trials):
        assert ot_trial.value == pytest.approx(sum(final[t.trial_id] for t in group) / 3)
