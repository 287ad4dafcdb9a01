"""Repeater: groups of repeated configs, the group mean told to the wrapped searcher, resume."""

from __future__ import annotations

import math
import pickle

import pytest
from optuna.trial import TrialState

from tuner.search import (
    TRIAL_INDEX,
    BasicVariantGenerator,
    ConcurrencyLimiter,
    OptunaSearch,
    Repeater,
    Searcher,
    grid_search,
    uniform,
)

SPACE = {"x": uniform(0, 1)}


class Listed(Searcher):
    """Suggests the given configs in order, then FINISHED; keeps what it is told."""

    def __init__(self, configs, metric="loss", mode="min"):
        super().__init__(metric=metric, mode=mode)
        self.configs = list(configs)
        self.suggested: list[str] = []
        self.told: list[tuple[str, dict | None, bool]] = []

    def suggest(self, trial_id):
        if len(self.suggested) == len(self.configs):
            return Searcher.FINISHED
        self.suggested.append(trial_id)
        return dict(self.configs[len(self.suggested) - 1])

    def on_trial_complete(self, trial_id, result=None, error=False):  # no **kwargs: takes no `pruned`
        self.told.append((trial_id, result, error))


def optuna_repeater(repeat=3, seed=0):
    repeater = Repeater(OptunaSearch(metric="loss", mode="min", seed=seed), repeat=repeat)
    assert repeater.set_search_properties(None, None, SPACE)
    return repeater


def test_bad_arguments_name_the_argument():
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="repeat"):
            Repeater(BasicVariantGenerator(), repeat=bad)
    for bad in (object(), BasicVariantGenerator, None):
        with pytest.raises(ValueError, match="searcher"):
            Repeater(bad, repeat=2)
    for bad in (1, 0, "yes", None):
        with pytest.raises(ValueError, match="set_index"):
            Repeater(BasicVariantGenerator(), repeat=2, set_index=bad)


def test_each_suggestion_is_repeated_with_its_index():
    inner = Listed([{"x": 1, "nested": {"a": 1}}, {"x": 2, "nested": {"a": 2}}])
    repeater = Repeater(inner, repeat=3)
    configs = [repeater.suggest(f"t{i}") for i in range(6)]
    assert [c["x"] for c in configs] == [1, 1, 1, 2, 2, 2]
    assert [c[TRIAL_INDEX] for c in configs] == [0, 1, 2, 0, 1, 2]
    assert inner.suggested == ["t0", "t3"]  # the wrapped searcher sees the first trial of each group
    configs[0]["nested"]["a"] = 99  # trials do not share config objects
    assert configs[1]["nested"]["a"] == 1
    assert repeater.suggest("t6") == Searcher.FINISHED
    assert [g["trials"] for g in repeater.groups] == [["t0", "t1", "t2"], ["t3", "t4", "t5"]]

    plain = Repeater(Listed([{"x": 1}]), repeat=2, set_index=False)
    assert plain.suggest("a") == plain.suggest("b") == {"x": 1}


def test_the_wrapped_searcher_is_told_the_group_mean_once_every_repeat_ended():
    inner = Listed([{"x": 1}, {"x": 2}])
    repeater = Repeater(inner, repeat=3)
    for i in range(6):
        repeater.suggest(f"t{i}")
    repeater.on_trial_result("t0", {"loss": 5.0, "training_iteration": 1})  # not passed on
    repeater.on_trial_complete("t0", {"loss": 1.0, "training_iteration": 4})
    repeater.on_trial_complete("t4", {"loss": 10.0, "training_iteration": 4})
    repeater.on_trial_complete("t2", {"loss": 2.0, "training_iteration": 4})
    assert inner.told == []
    repeater.on_trial_complete("t1", {"loss": 6.0, "training_iteration": 4})
    assert inner.told == [("t0", {"loss": 3.0, "training_iteration": 4}, False)]
    # A failed repeat, and one that never reported the metric, are left out of the mean.
    repeater.on_trial_complete("t3", None, error=True)
    repeater.on_trial_complete("t5", {"other": 1.0, "training_iteration": 2})
    assert inner.told[1] == ("t3", {"loss": 10.0, "training_iteration": 4}, False)
    repeater.on_trial_complete("t1", {"loss": 0.0})  # the group was told: ignored
    repeater.on_trial_complete("unknown", {"loss": 0.0})  # ignored
    assert len(inner.told) == 2


def test_a_group_without_any_value_is_an_error_only_when_a_repeat_failed():
    inner = Listed([{"x": 1}, {"x": 2}])
    repeater = Repeater(inner, repeat=2)
    for i in range(4):
        repeater.suggest(f"t{i}")
    repeater.on_trial_complete("t0", None, error=True)
    repeater.on_trial_complete("t1", {"loss": float("nan")})
    repeater.on_trial_complete("t2", None)
    repeater.on_trial_complete("t3", {"training_iteration": 1})
    assert inner.told == [("t0", None, True), ("t2", None, False)]


def test_optuna_gets_complete_means_and_pruned_only_when_every_repeat_was_pruned():
    repeater = optuna_repeater(repeat=2)
    study_of = repeater.searcher
    for i in range(6):
        repeater.suggest(f"t{i}")
    repeater.on_trial_complete("t0", {"loss": 1.0, "training_iteration": 8})
    repeater.on_trial_complete("t1", {"loss": 3.0, "training_iteration": 2}, pruned=True)
    repeater.on_trial_complete("t2", {"loss": 4.0, "training_iteration": 2}, pruned=True)
    repeater.on_trial_complete("t3", {"loss": 6.0, "training_iteration": 4}, pruned=True)
    repeater.on_trial_complete("t4", None, error=True)
    repeater.on_trial_complete("t5", None, error=True)
    trials = study_of.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL]
    assert trials[0].value == 2.0
    assert trials[1].intermediate_values == {4: 5.0}  # the mean, at the furthest repeat's iteration


def test_the_same_means_as_ray_tunes_repeater():
    """Ray Tune's own Repeater over the same completions tells the same trials the same values."""
    from ray.tune.search import Searcher as RaySearcher
    from ray.tune.search.repeater import Repeater as RayRepeater

    class RayListed(RaySearcher):
        def __init__(self, configs):
            super().__init__(metric="loss", mode="min")
            self.configs, self.told = list(configs), []

        def suggest(self, trial_id):
            return dict(self.configs.pop(0)) if self.configs else None

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.told.append((trial_id, result))

    configs = [{"x": i} for i in range(4)]
    ours, theirs = Listed(configs), RayListed(configs)
    our_repeater, ray_repeater = Repeater(ours, repeat=3), RayRepeater(theirs, repeat=3)
    ids = [f"t{i}" for i in range(12)]
    for trial_id in ids:
        ours_config, ray_config = our_repeater.suggest(trial_id), ray_repeater.suggest(trial_id)
        assert ours_config == ray_config
    outcomes = [
        {"loss": 1.0}, {"loss": 2.0}, {"loss": 4.5},  # a plain group
        None, {"loss": 3.0}, {"other": 0.0},  # a failed repeat, one without the metric
        {"loss": 7.0}, {"loss": float("nan")}, {"loss": 1.0},
        {"loss": -1.0}, {"loss": 1.0}, {"loss": 3.0},
    ]
    order = [2, 0, 1, 5, 4, 3, 8, 6, 7, 11, 10, 9]
    for i in order:
        our_repeater.on_trial_complete(ids[i], outcomes[i], error=outcomes[i] is None)
        ray_repeater.on_trial_complete(ids[i], outcomes[i], error=outcomes[i] is None)
    assert [tid for tid, *_ in ours.told] == [tid for tid, _ in theirs.told] == ["t0", "t3", "t6", "t9"]
    for (_, ours_result, _), (_, ray_result) in zip(ours.told, theirs.told):
        assert ours_result["loss"] == pytest.approx(float(ray_result["loss"]))


def test_state_round_trip_keeps_groups_and_the_wrapped_searchers_state():
    def run(repeater, ids, losses):
        for trial_id, loss in zip(ids, losses):
            repeater.on_trial_complete(trial_id, {"loss": loss})

    original = optuna_repeater(repeat=3, seed=4)
    ids = [f"t{i}" for i in range(5)]
    configs = [original.suggest(t) for t in ids]
    run(original, ["t0", "t1", "t2", "t3"], [1.0, 2.0, 3.0, 4.0])
    state = pickle.loads(pickle.dumps(original.state_dict()))

    resumed = optuna_repeater(repeat=3, seed=4)
    resumed.load_state_dict(state)
    assert resumed.groups == original.groups
    # The open group goes on: the next trial joins it with the next index, without a new suggestion.
    for repeater in (original, resumed):
        config = repeater.suggest("t5")
        assert config["x"] == configs[3]["x"] and config[TRIAL_INDEX] == 2
        run(repeater, ["t4", "t5"], [5.0, 9.0])
        assert repeater.suggest("t6")["x"] == repeater.suggest("t7")["x"]
    values = [[t.value for t in r.searcher.study.get_trials(deepcopy=False)] for r in (original, resumed)]
    assert values[0] == values[1] == [2.0, 6.0, None]
    with pytest.raises(ValueError, match="state"):
        resumed.load_state_dict({"groups": []})


def test_num_samples_not_a_multiple_of_repeat_is_warned(caplog):
    repeater = Repeater(OptunaSearch(), repeat=3)
    assert repeater.set_search_properties("loss", "min", SPACE, num_samples=7)
    assert "not a multiple of repeat=3" in caplog.text
    caplog.clear()
    # The grid x random generator knows its own trials: each of them is repeated, nothing to warn.
    grid = Repeater(BasicVariantGenerator(random_state=0), repeat=3)
    assert grid.set_search_properties("loss", "min", {"a": grid_search([1, 2])}, num_samples=1)
    assert [grid.suggest(str(i))["a"] for i in range(6)] == [1, 1, 1, 2, 2, 2]
    assert grid.suggest("6") == Searcher.FINISHED and not caplog.text


def test_metric_and_mode_are_the_wrapped_searchers_and_a_limiter_limits_groups():
    repeater = Repeater(OptunaSearch(), repeat=2)
    assert repeater.metric is None
    assert repeater.set_search_properties("acc", "max", SPACE)
    assert (repeater.metric, repeater.mode) == ("acc", "max")
    # Repeater over a ConcurrencyLimiter: the limit counts groups, whose first trial it saw.
    limited = Repeater(ConcurrencyLimiter(OptunaSearch(metric="loss", mode="min", seed=0), 1), repeat=2)
    assert limited.set_search_properties(None, None, SPACE)
    assert isinstance(limited.suggest("a"), dict) and isinstance(limited.suggest("b"), dict)
    assert limited.suggest("c") is None
    limited.on_trial_complete("a", {"loss": 1.0})
    assert limited.suggest("c") is None  # b still runs: the group is not done
    limited.on_trial_complete("b", {"loss": 3.0})
    assert isinstance(limited.suggest("c"), dict)
    assert math.isclose(limited.searcher.searcher.study.trials[0].value, 2.0)


def test_docstring_example():
    import doctest

    import tuner.search.repeater

    failures, tried = doctest.testmod(tuner.search.repeater)
    assert failures == 0 and tried > 0
