"""OptunaSearch: space translation, ask/tell bookkeeping, warm starts, TPE vs random, resume."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from tuner.search import (
    BasicVariantGenerator,
    OptunaSearch,
    Searcher,
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)

ALL_DOMAINS = {
    "u": uniform(-1.0, 1.0),
    "lu": loguniform(1e-4, 1e-1),
    "qu": quniform(0.05, 1.0, 0.1),
    "qlu": qloguniform(1e-3, 1.0, 1e-3),
    "ri": randint(0, 10),
    "qri": qrandint(1, 10, 3),
    "lri": lograndint(1, 1000),
    "qlri": qlograndint(2, 100, 4),
    "c": choice(["relu", "tanh", 3, None]),
    "cobj": choice([{"kind": "a"}, [1, 2], ("t",)]),
}


def make(space, seed=0, metric="loss", mode="min", **kwargs):
    searcher = OptunaSearch(metric=metric, mode=mode, seed=seed, **kwargs)
    assert searcher.set_search_properties(None, None, space)
    return searcher


def finish(searcher, trial_id, value, iteration=1, **kwargs):
    result = {"loss": value, "training_iteration": iteration}
    searcher.on_trial_result(trial_id, result)
    searcher.on_trial_complete(trial_id, result, **kwargs)


def trial_of(searcher, number):
    return searcher.study.get_trials(deepcopy=False)[number]


# --------------------------------------------------------------------------- translation


def test_each_domain_type_translates_to_the_matching_optuna_distribution():
    dists = OptunaSearch.convert_search_space(ALL_DOMAINS)
    assert dists["u"] == FloatDistribution(-1.0, 1.0)
    assert dists["lu"] == FloatDistribution(1e-4, 1e-1, log=True)
    # quantized: the multiples of q inside [lower, upper] (0.05 is not one), step q
    assert dists["qu"] == FloatDistribution(0.1, 1.0, step=0.1)
    # Optuna has no step with log=True: log-uniform, rounded to q afterwards
    assert dists["qlu"] == FloatDistribution(1e-3, 1.0, log=True)
    assert dists["ri"] == IntDistribution(0, 9)  # randint: upper exclusive
    assert dists["qri"] == IntDistribution(3, 9, step=3)  # qrandint: multiples of q, inclusive
    assert dists["lri"] == IntDistribution(1, 999, log=True)
    assert dists["qlri"] == IntDistribution(4, 100, log=True)
    assert dists["c"] == CategoricalDistribution(["relu", "tanh", 3, None])
    assert dists["cobj"] == CategoricalDistribution([0, 1, 2])  # objects go through indices


def test_suggested_values_stay_inside_our_domains_and_keep_their_types():
    searcher = make(ALL_DOMAINS, sampler=optuna.samplers.RandomSampler(seed=3))
    seen_cobj = []
    for i in range(60):
        config = searcher.suggest(f"t{i}")
        for key, domain in ALL_DOMAINS.items():
            assert domain.is_valid(config[key]), (key, config[key])
        assert isinstance(config["ri"], int) and isinstance(config["qu"], float)
        assert config["qri"] % 3 == 0 and config["qlri"] % 4 == 0
        assert round(config["qu"], 10) == config["qu"]  # 0.3, not 0.30000000000000004
        seen_cobj.append(config["cobj"])
        finish(searcher, f"t{i}", float(i))
    assert {repr(c) for c in seen_cobj} == {"{'kind': 'a'}", "[1, 2]", "('t',)"}
    # a category object is a copy: editing a config never edits the space
    dict_configs = [c for c in seen_cobj if isinstance(c, dict)]
    dict_configs[0]["kind"] = "changed"
    assert ALL_DOMAINS["cobj"].categories[0] == {"kind": "a"}


def test_nested_space_round_trips_with_flattened_optuna_names_and_constants():
    space = {
        "model": {"lr": loguniform(1e-4, 1e-1), "layers": [randint(1, 4), 64]},
        "opt": {"name": "adam", "betas": [0.9, 0.999]},
        "env": "CartPole-v1",
        "act": choice(["relu", "tanh"]),
    }
    searcher = make(space)
    config = searcher.suggest("t0")
    assert set(config) == {"model", "opt", "env", "act"}
    assert config["opt"] == {"name": "adam", "betas": [0.9, 0.999]}
    assert config["env"] == "CartPole-v1"
    assert 1e-4 <= config["model"]["lr"] < 1e-1
    assert config["model"]["layers"][1] == 64 and 1 <= config["model"]["layers"][0] <= 3
    params = trial_of(searcher, 0).params
    assert set(params) == {"model/lr", "model/layers/0", "act"}
    assert params["model/lr"] == config["model"]["lr"]
    config["opt"]["betas"].append(1)  # constants are copies
    assert space["opt"]["betas"] == [0.9, 0.999]


def test_optuna_distributions_can_be_given_directly_as_in_ray():
    searcher = OptunaSearch(
        space={"a/b": FloatDistribution(0, 1), "c": IntDistribution(1, 3)},
        metric="loss", mode="min", seed=0,
    )
    config = searcher.suggest("t0")
    assert set(config) == {"a", "c"} and 0 <= config["a"]["b"] <= 1


@pytest.mark.parametrize(
    "space, key, words",
    [
        ({"x": randn(0, 1)}, "'x'", "normal"),
        ({"m": {"x": qrandn(0, 1, 0.1)}}, "'m/x'", "normal"),
        ({"m": {"f": sample_from(lambda spec: 1)}}, "'m/f'", "sample_from"),
        ({"g": {"h": grid_search([1, 2])}}, "'g/h'", "BasicVariantGenerator"),
        ({"c": choice([{"lr": uniform(0, 1)}, 2])}, "'c'", "conditional"),
    ],
)
def test_unsupported_domains_raise_naming_the_key(space, key, words):
    with pytest.raises(ValueError, match=key) as info:
        OptunaSearch(space=space)
    assert words in str(info.value)
    searcher = OptunaSearch(metric="loss", mode="min")
    with pytest.raises(ValueError, match=key):
        searcher.set_search_properties(None, None, space)
    assert searcher.metric == "loss" and searcher.study is None  # nothing half-applied


# --------------------------------------------------------------------------- validation


def test_metric_mode_validation_and_conflicts():
    with pytest.raises(ValueError, match="mode"):
        OptunaSearch(mode="minimize")
    with pytest.raises(ValueError, match="metric"):
        OptunaSearch(metric="")
    with pytest.raises(ValueError, match="sampler"):
        OptunaSearch(sampler="tpe")
    with pytest.raises(ValueError, match="seed"):
        OptunaSearch(seed=-1)
    searcher = OptunaSearch(metric="loss", mode="min")
    assert not searcher.set_search_properties("acc", None, {"x": uniform(0, 1)})
    assert not searcher.set_search_properties(None, "max", {"x": uniform(0, 1)})
    assert searcher.set_search_properties("loss", "min", {"x": uniform(0, 1)})
    with pytest.raises(ValueError, match="mode"):
        OptunaSearch().set_search_properties("loss", "maximize", {"x": uniform(0, 1)})


def test_suggest_needs_a_space_and_metric_and_mode():
    with pytest.raises(RuntimeError, match="search space"):
        OptunaSearch(metric="loss", mode="min").suggest("t0")
    searcher = OptunaSearch(space={"x": uniform(0, 1)})
    with pytest.raises(RuntimeError, match="metric and mode"):
        searcher.suggest("t0")
    assert searcher.set_search_properties("loss", "max", {})
    assert searcher.suggest("t0")["x"] < 1
    assert searcher.study.direction == optuna.study.StudyDirection.MAXIMIZE


def test_a_constructor_space_is_kept_and_tune_run_constants_are_merged():
    space = {"x": uniform(0, 1)}
    searcher = OptunaSearch(space=space, metric="loss", mode="min", seed=0)
    assert not searcher.set_search_properties(None, None, {"y": uniform(0, 1)})
    assert searcher.set_search_properties(None, None, space)  # the same space
    assert searcher.set_search_properties(None, None, {"env": "Pendulum", "x": 5})
    config = searcher.suggest("t0")
    assert config["env"] == "Pendulum" and 0 <= config["x"] < 1  # the suggestion wins


def test_the_seed_comes_from_tune_run_when_not_given():
    def first_configs(ctor_seed, run_seed):
        searcher = OptunaSearch(metric="loss", mode="min", seed=ctor_seed)
        assert searcher.set_search_properties(None, None, {"x": uniform(0, 1)}, seed=run_seed)
        return [searcher.suggest(f"t{i}")["x"] for i in range(3)]

    assert first_configs(None, 7) == first_configs(None, 7)
    assert first_configs(None, 7) != first_configs(None, 8)
    assert first_configs(7, 1) == first_configs(7, 2)  # the constructor's seed wins


# --------------------------------------------------------------------------- ask / tell


def test_intermediate_results_and_outcomes_reach_the_study():
    searcher = make({"x": uniform(0, 1)})
    for i in range(5):
        searcher.suggest(f"t{i}")
    for step, value in [(1, 3.0), (2, 2.0), (2, 9.0), (3, 1.5)]:  # a repeated step is ignored
        searcher.on_trial_result("t0", {"loss": value, "training_iteration": step})
    searcher.on_trial_complete("t0", {"loss": 1.5, "training_iteration": 3})
    finish(searcher, "t1", 4.0, iteration=2, pruned=True)
    searcher.on_trial_result("t2", {"loss": 8.0, "training_iteration": 1})
    searcher.on_trial_complete("t2", {"loss": 8.0, "training_iteration": 1}, error=True)
    searcher.on_trial_complete("t3", None)  # ended without any result
    searcher.on_trial_complete("t4", {"loss": float("nan"), "training_iteration": 1})
    searcher.on_trial_complete("t4", {"loss": 1.0})  # already told: ignored, no error
    searcher.on_trial_complete("unknown", {"loss": 1.0})

    trials = searcher.study.get_trials(deepcopy=False)
    assert trials[0].state == TrialState.COMPLETE and trials[0].value == 1.5
    assert trials[0].intermediate_values == {1: 3.0, 2: 2.0, 3: 1.5}
    assert trials[1].state == TrialState.PRUNED and trials[1].intermediate_values == {2: 4.0}
    assert trials[1].value == 4.0  # Optuna keeps the last intermediate value of a pruned trial
    assert trials[2].state == TrialState.FAIL and trials[2].value is None
    assert trials[3].state == TrialState.PRUNED
    assert trials[4].state == TrialState.FAIL


def test_pruned_reports_the_last_result_if_it_was_not_reported():
    searcher = make({"x": uniform(0, 1)})
    searcher.suggest("t0")
    searcher.on_trial_complete("t0", {"loss": 0.25, "training_iteration": 4}, pruned=True)
    trial = trial_of(searcher, 0)
    assert trial.state == TrialState.PRUNED and trial.intermediate_values == {4: 0.25}


def test_a_trial_id_cannot_be_suggested_twice_while_live():
    searcher = make({"x": uniform(0, 1)})
    searcher.suggest("t0")
    with pytest.raises(ValueError, match="t0"):
        searcher.suggest("t0")


def test_define_by_run_space():
    def space(trial):
        kind = trial.suggest_categorical("kind", ["a", "b"])
        if kind == "a":
            trial.suggest_float("model/lr", 1e-3, 1e-1, log=True)
        return {"env": "CartPole-v1"}

    searcher = OptunaSearch(space=space, metric="loss", mode="min", seed=0,
                            points_to_evaluate=[{"kind": "a", "model": {"lr": 0.01}}])
    assert searcher.set_search_properties(None, None, {})
    config = searcher.suggest("t0")
    assert config == {"kind": "a", "model": {"lr": 0.01}, "env": "CartPole-v1"}
    for i in range(1, 10):
        config = searcher.suggest(f"t{i}")
        assert ("model" in config) == (config["kind"] == "a")
    with pytest.raises(ValueError, match="evaluated_rewards"):
        OptunaSearch(space=space, points_to_evaluate=[{"kind": "b"}], evaluated_rewards=[1.0])


# --------------------------------------------------------------------------- warm starts


def test_points_to_evaluate_come_first_nested_flattened_or_partial():
    space = {"m": {"lr": loguniform(1e-4, 1e-1), "act": choice([{"f": "relu"}, {"f": "tanh"}])},
             "n": randint(1, 10), "env": "X"}
    points = [
        {"m": {"lr": 0.01, "act": {"f": "tanh"}}, "n": 3},
        {"m/lr": 0.002, "n": 7, "env": "X"},  # flattened key; an equal constant is fine
        {"n": 5},  # partial: the rest is sampled
    ]
    searcher = make(space, points_to_evaluate=points)
    configs = [searcher.suggest(f"t{i}") for i in range(4)]
    assert configs[0] == {"m": {"lr": 0.01, "act": {"f": "tanh"}}, "n": 3, "env": "X"}
    assert configs[1]["m"]["lr"] == 0.002 and configs[1]["n"] == 7
    assert configs[2]["n"] == 5 and 1e-4 <= configs[2]["m"]["lr"] < 1e-1
    assert configs[3] not in configs[:3]

    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\].*'m/nope'"):
        make(space, points_to_evaluate=[{"m": {"nope": 1}}])
    with pytest.raises(ValueError, match="'env'"):
        make(space, points_to_evaluate=[{"env": "Y"}])
    with pytest.raises(ValueError, match="not one of the choices"):
        make(space, points_to_evaluate=[{"m": {"act": {"f": "gelu"}}}])


def test_evaluated_rewards_become_completed_trials():
    space = {"x": uniform(-5, 5), "c": choice(["a", "b"])}
    points = [{"x": 1.0, "c": "a"}, {"x": -2.0, "c": "b"}]
    searcher = make(space, points_to_evaluate=points, evaluated_rewards=[0.5, 3.0])
    config = searcher.suggest("t0")
    trials = searcher.study.get_trials(deepcopy=False)
    assert [t.state for t in trials[:2]] == [TrialState.COMPLETE] * 2
    assert [t.params for t in trials[:2]] == points
    assert [t.value for t in trials[:2]] == [0.5, 3.0]
    assert trials[2].state == TrialState.RUNNING and config not in points  # not re-run
    assert searcher.study.best_trial.params == points[0]

    with pytest.raises(ValueError, match="evaluated_rewards"):
        OptunaSearch(points_to_evaluate=points, evaluated_rewards=[1.0])
    with pytest.raises(ValueError, match=r"evaluated_rewards\[1\]"):
        OptunaSearch(points_to_evaluate=points, evaluated_rewards=[1.0, float("nan")])


def test_add_evaluated_point():
    searcher = make({"x": uniform(0, 1)})
    searcher.add_evaluated_point({"x": 0.5}, 2.0)
    searcher.add_evaluated_point({"x": 0.1}, None, pruned=True, intermediate_values=[3.0, 2.5])
    trials = searcher.study.get_trials(deepcopy=False)
    assert trials[0].state == TrialState.COMPLETE and trials[0].value == 2.0
    assert trials[1].state == TrialState.PRUNED and trials[1].intermediate_values == {1: 3.0,
                                                                                      2: 2.5}


# --------------------------------------------------------------------------- TPE beats random


def _objective(config):
    # A shifted quadratic over a linear and a log-scale axis; its minimum 0 at x=1.7, y=10**-1.3.
    return (config["x"] - 1.7) ** 2 + (math.log10(config["y"]) + 1.3) ** 2


def _best_of(searcher, budget):
    best = math.inf
    for i in range(budget):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict)
        value = _objective(config)
        best = min(best, value)
        result = {"loss": value, "training_iteration": 1}
        searcher.on_trial_result(f"t{i}", result)
        searcher.on_trial_complete(f"t{i}", result)
    return best


def test_tpe_beats_random_search_on_a_2d_toy_objective():
    space = {"x": uniform(-5.0, 5.0), "y": loguniform(1e-4, 1e2)}
    budget, seeds = 40, range(5)
    tpe, rnd = [], []
    for seed in seeds:
        tpe.append(_best_of(make(space, seed=seed), budget))
        random_search = BasicVariantGenerator(random_state=seed)
        assert random_search.set_search_properties("loss", "min", space, num_samples=budget)
        rnd.append(_best_of(random_search, budget))
    assert np.mean(tpe) < np.mean(rnd), (tpe, rnd)
    assert np.mean(tpe) < 0.5 * np.mean(rnd), (tpe, rnd)  # clearly, not by a hair


# --------------------------------------------------------------------------- resume


def _continue(searcher, start, count, live_to_finish=()):
    configs = []
    for trial_id in live_to_finish:
        finish(searcher, trial_id, 10.0)
    for i in range(start, start + count):
        config = searcher.suggest(f"t{i}")
        configs.append(config)
        finish(searcher, f"t{i}", _objective(config))
    return configs


@pytest.mark.parametrize("load_first", [False, True])
def test_a_restored_searcher_continues_exactly_like_an_uninterrupted_one(load_first):
    space = {"x": uniform(-5.0, 5.0), "y": loguniform(1e-4, 1e2), "c": choice(["a", "b"]),
             "n": {"k": randint(1, 5)}, "env": "X"}
    original = make(space, seed=3, points_to_evaluate=[{"x": 0.0}])
    _continue(original, 0, 10)  # past TPE's 10 random startup trials
    original.suggest("live")  # asked, not told at snapshot time
    original.on_trial_result("live", {"loss": 7.0, "training_iteration": 1})
    state = pickle.loads(pickle.dumps(original.state_dict()))
    assert set(state["live"]) == {"live"}

    restored = OptunaSearch(metric="loss", mode="min", seed=3, points_to_evaluate=[{"x": 0.0}])
    if load_first:
        restored.load_state_dict(state)
        assert restored.set_search_properties(None, None, space)
    else:
        assert restored.set_search_properties(None, None, space)
        restored.load_state_dict(state)

    expected = _continue(original, 10, 5, live_to_finish=["live"])
    got = _continue(restored, 10, 5, live_to_finish=["live"])
    assert got == expected
    live = restored.study.get_trials(deepcopy=False)[10]
    assert live.state == TrialState.COMPLETE and live.value == 10.0
    assert live.intermediate_values == {1: 7.0}  # reported before the snapshot; step 1 kept
    assert len(restored.study.trials) == len(original.study.trials) == 16


def test_state_before_any_suggestion_and_a_bad_state():
    searcher = make({"x": uniform(0, 1)}, points_to_evaluate=[{"x": 0.25}])
    state = copy.deepcopy(searcher.state_dict())
    assert state["study"] is None
    fresh = make({"x": uniform(0, 1)}, points_to_evaluate=[{"x": 0.25}])
    fresh.load_state_dict(state)
    assert fresh.suggest("t0") == {"x": 0.25}
    with pytest.raises(ValueError, match="state"):
        fresh.load_state_dict({"position": 3})


def test_is_a_searcher():
    assert isinstance(OptunaSearch(), Searcher)
