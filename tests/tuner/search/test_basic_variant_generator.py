"""BasicVariantGenerator: grid x num_samples, points_to_evaluate, seeding, resume, limits."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from tuner.search import (
    BasicVariantGenerator,
    Searcher,
    choice,
    grid_search,
    loguniform,
    randint,
    sample_from,
    uniform,
)

SPACE = {
    "lr": loguniform(1e-4, 1e-1),
    "model": {"layers": grid_search([1, 2]), "act": grid_search(["relu", "tanh", "gelu"])},
    "batch": randint(16, 256),
    "scaled": sample_from(lambda spec: spec.config.lr * spec.config.batch),
    "env": "CartPole-v1",
}


def make(space=SPACE, num_samples=2, seed=0, **kwargs):
    gen = BasicVariantGenerator(**kwargs)
    assert gen.set_search_properties("loss", "min", space, num_samples=num_samples, seed=seed)
    return gen


def drain(gen, start=0):
    configs = []
    while True:
        config = gen.suggest(f"t{start + len(configs)}")
        if config == Searcher.FINISHED:
            return configs
        assert isinstance(config, dict)
        configs.append(config)


def test_grid_times_num_samples_count_and_order():
    gen = make(num_samples=3)
    assert gen.total_trials == 3 * 6
    configs = drain(gen)
    assert len(configs) == 18
    grid = [(c["model"]["act"], c["model"]["layers"]) for c in configs]
    # axes sorted by path ("act" < "layers"), the first one varies fastest (Ray Tune's order)
    one_pass = [(a, n) for n in (1, 2) for a in ("relu", "tanh", "gelu")]
    assert grid == one_pass * 3
    for c in configs:
        assert 1e-4 <= c["lr"] < 1e-1 and 16 <= c["batch"] < 256
        assert c["scaled"] == pytest.approx(c["lr"] * c["batch"])
        assert c["env"] == "CartPole-v1"
    # random values are fresh for each grid point
    assert len({c["lr"] for c in configs}) == 18
    assert gen.suggest("again") == Searcher.FINISHED


def test_suggest_returns_new_dicts():
    gen = make(space={"a": {"b": 1}}, num_samples=2)
    first, second = gen.suggest("1"), gen.suggest("2")
    first["a"]["b"] = 99
    assert second == {"a": {"b": 1}}


def test_same_seed_same_configs_different_seed_different():
    assert drain(make(seed=123)) == drain(make(seed=123))
    assert drain(make(seed=123)) != drain(make(seed=124))
    # random_state in the constructor wins over seed
    assert drain(make(seed=1, random_state=5)) == drain(make(seed=2, random_state=5))
    # no seed at all: random
    assert drain(make(seed=None)) != drain(make(seed=None))


def test_state_round_trip_continues_identically():
    reference = drain(make(seed=7, num_samples=3))

    gen = make(seed=7, num_samples=3)
    head = [gen.suggest(f"t{i}") for i in range(7)]
    gen.on_trial_complete("t0")
    state = gen.state_dict()
    state = pickle.loads(pickle.dumps(state))
    json.dumps(state)  # plain data

    restored = make(seed=999, num_samples=3)  # the state's rng wins over a new seed
    restored.load_state_dict(state)
    tail = drain(restored, start=7)
    assert head + tail == reference

    # load_state_dict before set_search_properties works as well
    early = BasicVariantGenerator()
    early.load_state_dict(state)
    early.set_search_properties("loss", "min", SPACE, num_samples=3, seed=None)
    assert drain(early, start=7) == reference[7:]


def test_state_for_a_different_space_is_rejected():
    state = make(num_samples=2).state_dict()
    gen = make(num_samples=3)
    with pytest.raises(ValueError, match=r"state: it was saved for 12 trials .* give 18"):
        gen.load_state_dict(state)
    with pytest.raises(ValueError, match=r"^state must be a dict from"):
        gen.load_state_dict({"nope": 1})


def test_constant_grid_search_keeps_random_values_across_the_grid():
    space = {"g": grid_search([1, 2, 3]), "x": uniform(0, 1), "y": sample_from(
        lambda spec: spec.config.g * 10)}
    gen = make(space=space, num_samples=2, constant_grid_search=True, seed=3)
    configs = drain(gen)
    assert [c["g"] for c in configs] == [1, 2, 3, 1, 2, 3]
    assert configs[0]["x"] == configs[1]["x"] == configs[2]["x"]
    assert configs[3]["x"] == configs[4]["x"] == configs[5]["x"] != configs[0]["x"]
    assert [c["y"] for c in configs] == [10, 20, 30] * 2

    # resume in the middle of a grid pass keeps that pass's constants
    gen = make(space=space, num_samples=2, constant_grid_search=True, seed=3)
    head = [gen.suggest(str(i)) for i in range(4)]
    restored = make(space=space, num_samples=2, constant_grid_search=True, seed=3)
    restored.load_state_dict(gen.state_dict())
    assert head + drain(restored) == configs


def test_points_to_evaluate_come_first_and_are_merged():
    points = [
        {"lr": 0.01, "model": {"layers": 2, "act": "tanh"}},
        {"model/act": "gelu", "batch": 32},
    ]
    gen = make(num_samples=1, points_to_evaluate=points, seed=0)
    assert gen.total_trials == 2 + 6
    configs = drain(gen)
    assert len(configs) == 8
    first, second = configs[0], configs[1]
    assert first["lr"] == 0.01 and first["model"] == {"layers": 2, "act": "tanh"}
    assert 16 <= first["batch"] < 256
    assert first["scaled"] == pytest.approx(0.01 * first["batch"])
    assert second["model"]["act"] == "gelu" and second["batch"] == 32
    assert second["model"]["layers"] in (1, 2)  # an unfixed grid axis gets one of its values
    assert 1e-4 <= second["lr"] < 1e-1
    assert [(c["model"]["act"], c["model"]["layers"]) for c in configs[2:]] == [
        (a, n) for n in (1, 2) for a in ("relu", "tanh", "gelu")
    ]


def test_points_to_evaluate_unknown_key_is_an_error():
    gen = BasicVariantGenerator(points_to_evaluate=[{"lr": 0.1, "typo": 1}])
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\]: key 'typo' is not in"):
        gen.set_search_properties(None, None, SPACE)


def test_max_concurrent_limits_live_trials():
    gen = make(space={"x": uniform(0, 1)}, num_samples=3, max_concurrent=2)
    assert isinstance(gen.suggest("a"), dict) and isinstance(gen.suggest("b"), dict)
    assert gen.suggest("c") is None
    gen.on_trial_complete("a")
    assert isinstance(gen.suggest("c"), dict)
    assert gen.suggest("d") == Searcher.FINISHED


def test_set_search_properties_twice_returns_false():
    gen = make()
    assert gen.set_search_properties("loss", "min", {"x": 1}) is False
    assert gen.total_trials == 12


def test_suggest_before_space_is_a_clear_error():
    with pytest.raises(RuntimeError, match="set_search_properties"):
        BasicVariantGenerator().suggest("t0")


def test_metric_and_mode():
    gen = make()
    assert (gen.metric, gen.mode) == ("loss", "min")
    with pytest.raises(ValueError, match=r"^mode must be one of \['min', 'max'\]"):
        Searcher(mode="maximize")
    with pytest.raises(ValueError, match=r"^metric must be a non-empty string"):
        Searcher(metric=3)
    with pytest.raises(ValueError, match=r"^mode must be one of"):
        Searcher().set_search_properties(None, "best", {})
    conflicting = Searcher(metric="reward", mode="max")
    assert conflicting.set_search_properties("loss", None, {}) is False
    assert conflicting.set_search_properties(None, "min", {}) is False
    assert (conflicting.metric, conflicting.mode) == ("reward", "max")
    filled = Searcher(mode="max")
    assert filled.set_search_properties("reward", "max", {}) is True
    assert (filled.metric, filled.mode) == ("reward", "max")
    # a conflict (here with a restored state's mode) leaves a BasicVariantGenerator without space
    bvg = BasicVariantGenerator()
    bvg.load_state_dict(make(num_samples=2).state_dict())  # metric "loss", mode "min"
    assert bvg.set_search_properties("loss", "max", SPACE, num_samples=2) is False
    assert bvg.total_trials == 0


@pytest.mark.parametrize(
    "kwargs, props, match",
    [
        ({}, {"config": [1]}, r"^config must be a dict, got list"),
        ({}, {"num_samples": 0}, r"^num_samples must be an integer >= 1 \(or 0 with points_to_evaluate: the points "
                                 r"only\), got 0"),
        ({}, {"num_samples": 1.5}, r"^num_samples must be an integer >= 1 .*, got 1.5"),
        ({}, {"seed": "x"}, r"^seed must be an integer >= 0 or None, got 'x'"),
        ({"random_state": -1}, {}, r"^random_state must be an integer >= 0"),
        ({"max_concurrent": -1}, {}, r"^max_concurrent must be an integer >= 0"),
        ({"points_to_evaluate": {"a": 1}}, {}, r"^points_to_evaluate must be a list of dicts"),
        ({}, {"config": {"a": {"grid_search": []}}}, r"grid_search at 'a': values must be"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, props, match):
    with pytest.raises(ValueError, match=match):
        gen = BasicVariantGenerator(**kwargs)
        args = {"config": {"x": choice([1, 2])}, "num_samples": 1, "seed": 0, **props}
        gen.set_search_properties(None, None, args.pop("config"), **args)


def test_numpy_generator_as_random_state():
    a = drain(make(random_state=np.random.default_rng(4)))
    b = drain(make(random_state=np.random.default_rng(4)))
    assert a == b


def test_num_samples_zero_runs_only_the_points_and_an_empty_space_takes_them_whole():
    points = [{"x": 1, "model": {"w": 2}}, {"x": 2, "model": {"w": 3, "d": 1}}]
    bvg = BasicVariantGenerator(points_to_evaluate=points)
    assert bvg.set_search_properties(None, None, {}, num_samples=0)
    assert bvg.total_trials == 2
    # each point as it is: a key one point has stays out of the other
    assert [bvg.suggest("0"), bvg.suggest("1"), bvg.suggest("2")] == [*points, "FINISHED"]
