"""Config expansion: grid axes at any depth, sampling, sample_from, flat keys."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.search import (
    choice,
    count_grid_points,
    flatten_dict,
    grid_search,
    grid_variants,
    iter_domains,
    randint,
    resolve_config,
    sample_from,
    unflatten_dict,
    uniform,
)
from tuner.search.space import Domain


def rng(seed=0):
    return np.random.default_rng(seed)


def test_count_and_order_follow_ray_tune():
    space = {"b": grid_search(["x", "y", "z"]), "a": grid_search([1, 2]), "c": 5}
    assert count_grid_points(space) == 6
    # axes sorted by path ("a" before "b"), the first one varies fastest
    assert grid_variants(space) == [
        {("a",): 1, ("b",): "x"},
        {("a",): 2, ("b",): "x"},
        {("a",): 1, ("b",): "y"},
        {("a",): 2, ("b",): "y"},
        {("a",): 1, ("b",): "z"},
        {("a",): 2, ("b",): "z"},
    ]


def test_no_grid_is_one_empty_variant():
    space = {"lr": uniform(0, 1)}
    assert count_grid_points(space) == 1
    assert grid_variants(space) == [{}]


def test_nested_grid_axes_and_plain_dict_syntax():
    space = {
        "model": {"layers": {"grid_search": [1, 2, 3]}, "act": grid_search(["relu", "tanh"])},
        "env": {"id": "CartPole-v1", "n": [1, {"k": grid_search([7, 8])}]},
    }
    assert count_grid_points(space) == 12
    variants = grid_variants(space)
    assert len({tuple(sorted(v.items(), key=repr)) for v in variants}) == 12
    assert set(variants[0]) == {("model", "layers"), ("model", "act"), ("env", "n", 1, "k")}
    config = resolve_config(space, variants[-1], rng())
    assert config == {
        "model": {"layers": 3, "act": "tanh"},
        "env": {"id": "CartPole-v1", "n": [1, {"k": 8}]},
    }


def test_resolve_samples_every_domain_and_keeps_constants():
    space = {
        "lr": uniform(0.1, 0.2),
        "opt": {"name": choice(["adam", "sgd"]), "betas": (0.9, uniform(0.9, 1.0))},
        "sizes": [randint(1, 4), 64],
        "const": {"x": [1, 2]},
    }
    config = resolve_config(space, {}, rng())
    assert 0.1 <= config["lr"] < 0.2
    assert config["opt"]["name"] in ("adam", "sgd")
    assert isinstance(config["opt"]["betas"], tuple) and config["opt"]["betas"][0] == 0.9
    assert 0.9 <= config["opt"]["betas"][1] < 1.0
    assert config["sizes"][0] in (1, 2, 3) and config["sizes"][1] == 64
    assert config["const"] == {"x": [1, 2]}
    assert config["const"] is not space["const"] and config["const"]["x"] is not space["const"]["x"]
    assert isinstance(space["lr"], Domain)  # the space itself is left untouched


def test_grid_values_are_copied_per_config():
    space = {"net": grid_search([{"units": [32, 32]}])}
    a = resolve_config(space, grid_variants(space)[0], rng())
    a["net"]["units"].append(1)
    b = resolve_config(space, grid_variants(space)[0], rng())
    assert b["net"]["units"] == [32, 32]


def test_sample_from_reads_other_resolved_keys():
    space = {
        "double": sample_from(lambda spec: 2 * spec.config.base),
        "base": randint(1, 100),
        "grid": grid_search([10, 20]),
        "nested": {"sum": sample_from(lambda spec: spec["config"]["grid"] + spec.config.base)},
        "chain": sample_from(lambda spec: spec.config.nested.sum + spec.config.double),
        "noarg": sample_from(lambda: "fixed"),
    }
    for assignment in grid_variants(space):
        config = resolve_config(space, assignment, rng(3))
        assert config["double"] == 2 * config["base"]
        assert config["nested"]["sum"] == config["grid"] + config["base"]
        assert config["chain"] == config["nested"]["sum"] + config["double"]
        assert config["noarg"] == "fixed"


def test_sample_from_can_use_the_searcher_rng():
    space = {"x": sample_from(lambda spec: spec.rng.integers(1_000_000))}
    assert resolve_config(space, {}, rng(1)) == resolve_config(space, {}, rng(1))


def test_circular_sample_from_is_a_clear_error():
    space = {
        "a": sample_from(lambda spec: spec.config.b),
        "b": sample_from(lambda spec: spec.config.a),
    }
    with pytest.raises(ValueError, match=r"sample_from: cannot resolve 'a', 'b'"):
        resolve_config(space, {}, rng())


def test_sample_from_errors_say_where():
    space = {"a": {"b": sample_from(lambda spec: spec.config.missing)}}
    with pytest.raises(AttributeError, match="missing") as info:
        resolve_config(space, {}, rng())
    assert "sample_from at 'a/b'" in "".join(getattr(info.value, "__notes__", []))


def test_conditional_space_inside_choice():
    space = {"opt": choice([{"name": "sgd", "lr": uniform(0, 1)}, {"name": "adam"}])}
    seen = set()
    for seed in range(20):
        config = resolve_config(space, {}, rng(seed))
        seen.add(config["opt"]["name"])
        if config["opt"]["name"] == "sgd":
            assert 0 <= config["opt"]["lr"] < 1
    assert seen == {"sgd", "adam"}


def test_resolve_is_deterministic_per_rng_seed():
    space = {"a": uniform(0, 1), "b": {"c": randint(0, 10**9)}}
    assert resolve_config(space, {}, rng(7)) == resolve_config(space, {}, rng(7))
    assert resolve_config(space, {}, rng(7)) != resolve_config(space, {}, rng(8))


def test_unassigned_grid_is_an_error():
    with pytest.raises(ValueError, match=r"grid_search at 'm/k' has no value in grid_assignment"):
        resolve_config({"m": {"k": grid_search([1, 2])}}, {}, rng())


def test_bad_grid_values_name_the_path():
    with pytest.raises(ValueError, match=r"grid_search at 'a/b': values must be a non-empty list"):
        count_grid_points({"a": {"b": {"grid_search": []}}})
    with pytest.raises(ValueError, match=r"grid_search at 'x': values must be a non-empty list"):
        grid_variants({"x": {"grid_search": 3}})


def test_config_must_be_a_dict():
    with pytest.raises(ValueError, match=r"config must be a dict, got list"):
        resolve_config([1], {}, rng())
    with pytest.raises(ValueError, match=r"config must be a dict"):
        iter_domains("lr")


def test_iter_domains_lists_domains_and_grids():
    lr = uniform(0, 1)
    space = {"lr": lr, "m": {"g": grid_search([1, 2])}, "l": [randint(0, 2)], "c": 3}
    found = iter_domains(space)
    assert [p for p, _ in found] == [("lr",), ("m", "g"), ("l", 0)]
    assert found[0][1] is lr and found[1][1] == [1, 2]


def test_flatten_and_unflatten_round_trip():
    nested = {"a": {"b": 1, "c": {"d": [1, 2]}}, "e": 2, "f": {}}
    flat = flatten_dict(nested)
    assert flat == {"a/b": 1, "a/c/d": [1, 2], "e": 2, "f": {}}
    assert unflatten_dict(flat) == nested
    assert flatten_dict({"a": {"b": 1}}, sep=".") == {"a.b": 1}
    with pytest.raises(ValueError, match=r"flatten_dict: key 'x/y' contains the delimiter"):
        flatten_dict({"x/y": 1}, prevent_delimiter=True)
    with pytest.raises(ValueError, match=r"unflatten_dict: key 'a/b' needs 'a' to be a dict"):
        unflatten_dict({"a": 1, "a/b": 2})
