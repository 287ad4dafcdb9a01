"""describe_search_space: every hparam of a search space with the domain TensorBoard shows."""

from __future__ import annotations

import json

import numpy as np

from tuner import tune
from tuner.tensorboard.domains import describe_search_space, flatten_config, hparam_value


def _by_name(space):
    entries = describe_search_space(space)
    assert json.loads(json.dumps(entries)) == entries  # stored in the experiment spec as JSON
    return {e["name"]: e for e in entries}


def test_numeric_domains_are_intervals_of_the_values_they_can_draw():
    d = _by_name({
        "u": tune.uniform(-1, 1), "qu": tune.quniform(0, 1, 0.25), "lu": tune.loguniform(1e-5, 1e-2),
        "ri": tune.randint(2, 10), "qri": tune.qrandint(0, 12, 4), "lri": tune.lograndint(1, 100),
    })
    assert (d["u"]["kind"], d["u"]["min"], d["u"]["max"], d["u"]["log"]) == ("interval", -1.0, 1.0, False)
    assert (d["qu"]["min"], d["qu"]["max"]) == (0.0, 1.0)
    assert (d["lu"]["kind"], d["lu"]["log"], d["lu"]["source"]) == ("interval", True, "loguniform(1e-05, 0.01)")
    assert (d["ri"]["kind"], d["ri"]["min"], d["ri"]["max"]) == ("int_interval", 2, 9)  # upper excluded
    assert (d["qri"]["min"], d["qri"]["max"]) == (0, 12)  # upper included
    assert (d["lri"]["min"], d["lri"]["max"], d["lri"]["log"]) == (1, 99, True)
    assert all(e["dtype"] == "float" and e["searched"] for e in d.values())


def test_choices_and_grids_are_discrete_with_one_column_type():
    d = _by_name({
        "act": tune.choice(["relu", "tanh"]), "n": tune.grid_search([16, 32, 16]), "flag": tune.choice([True, False]),
        "mixed": tune.choice([None, 0.1, "adam"]), "sizes": tune.grid_search([[64, 64], (128, 128)]),
    })
    assert (d["act"]["dtype"], d["act"]["values"]) == ("str", ["relu", "tanh"])
    assert (d["n"]["dtype"], d["n"]["values"], d["n"]["source"]) == ("float", [16, 32], "grid_search([16, 32, 16])")
    assert (d["flag"]["dtype"], d["flag"]["values"]) == ("bool", [True, False])
    assert (d["mixed"]["dtype"], d["mixed"]["values"]) == ("str", ["None", "0.1", "adam"])
    # Lists are one text hparam each; a tuple reads as the list the store keeps.
    assert (d["sizes"]["dtype"], d["sizes"]["values"]) == ("str", ["[64, 64]", "[128, 128]"])


def test_constants_nested_keys_and_domains_without_bounds():
    d = _by_name({
        "model": {"depth": tune.randint(1, 4), "hidden": [64, 64], "opt": {"lr": tune.uniform(0, 1)}},
        "gamma": 0.99, "env": "CartPole-v1", "seed": None, "extra": {},
        "noise": tune.randn(0, 1), "derived": tune.sample_from(lambda spec: 2 * spec.config.gamma),
        "layers": [tune.choice([32, 64]), 16],
    })
    assert list(d) == ["model.depth", "model.hidden", "model.opt.lr", "gamma", "env", "seed", "extra", "noise",
                       "derived", "layers"]
    assert d["gamma"] == {"name": "gamma", "kind": "discrete", "dtype": "float", "values": [0.99], "searched": False}
    assert (d["env"]["values"], d["seed"]["values"], d["extra"]["values"]) == (["CartPole-v1"], ["None"], ["{}"])
    assert (d["model.hidden"]["dtype"], d["model.hidden"]["values"]) == ("str", ["[64, 64]"])
    assert (d["noise"]["kind"], d["noise"]["dtype"]) == ("none", "float")
    assert (d["derived"]["kind"], d["derived"]["dtype"]) == ("none", None)
    assert (d["layers"]["kind"], d["layers"]["dtype"]) == ("none", "str")  # a list with a domain inside


def test_a_choice_of_dicts_leaves_its_keys_to_the_configs():
    d = _by_name({"opt": tune.choice([{"name": "sgd", "lr": tune.uniform(0, 1)}, {"name": "adam"}]), "x": 1})
    assert list(d) == ["x"]


def test_config_values_are_converted_as_their_column_wants():
    flat = flatten_config({"a": {"b": np.float32(0.5), "c": (1, 2)}, "n": np.int64(3), "s": "x", "none": None})
    assert flat == {"a.b": 0.5, "a.c": [1, 2], "n": 3, "s": "x", "none": None}
    assert hparam_value(flat["a.c"], "str") == "[1, 2]"
    assert hparam_value(None, "str") == "None" and hparam_value(0.1, "str") == "0.1"
    assert hparam_value(3, "float") == 3 and hparam_value(True, "bool") is True
    assert hparam_value(flat["a.c"], None) == "[1, 2]" and hparam_value(2.5, None) == 2.5
