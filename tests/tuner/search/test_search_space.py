"""Search-space domains: ranges, types, distributions, quantization and argument errors."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from tuner.search import space
from tuner.search.space import (
    Categorical,
    Float,
    Function,
    Integer,
    Normal,
    SampleSpec,
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

N = 4000


def draws(domain, n=N, seed=0):
    rng = np.random.default_rng(seed)
    return [domain.sample(rng) for _ in range(n)]


def test_uniform_range_and_type():
    values = draws(uniform(-2, 3))
    assert all(type(v) is float for v in values)
    assert all(-2 <= v < 3 for v in values)
    assert min(values) < -1.9 and max(values) > 2.9
    assert abs(np.mean(values) - 0.5) < 0.1


def test_loguniform_median_is_geometric_mean():
    values = draws(loguniform(1e-4, 1e-1))
    assert all(type(v) is float and 1e-4 <= v < 1e-1 for v in values)
    geometric_mean = math.sqrt(1e-4 * 1e-1)  # ~3.2e-3; a uniform draw has median ~0.05
    assert abs(math.log10(np.median(values)) - math.log10(geometric_mean)) < 0.1
    # each decade gets about a third of the draws
    decades = np.histogram(np.log10(values), bins=[-4, -3, -2, -1])[0] / N
    assert np.all(np.abs(decades - 1 / 3) < 0.04)


def test_loguniform_base_does_not_change_range():
    values = draws(loguniform(1, 1024, base=2), n=500)
    assert all(1 <= v < 1024 for v in values)
    assert repr(loguniform(1, 1024, base=2)) == "loguniform(1, 1024, base=2)"


def test_quniform_multiples_stay_float_and_reach_upper():
    values = draws(quniform(0, 1, 0.1))
    assert all(type(v) is float for v in values)
    assert all(0 <= v <= 1 for v in values)
    # rounded cleanly: exactly the values 0.0, 0.1, ..., 1.0 as written
    assert set(values) == {round(0.1 * k, 1) for k in range(11)}
    assert 1.0 in values  # quantization makes upper inclusive


def test_quniform_clips_to_multiples_inside_bounds():
    values = draws(quniform(0.03, 0.5, 0.1))
    assert set(values) == {0.1, 0.2, 0.3, 0.4, 0.5}


def test_qloguniform_multiples():
    values = draws(qloguniform(1e-3, 1.0, 1e-3))
    assert all(1e-3 <= v <= 1.0 for v in values)
    assert all(abs(v / 1e-3 - round(v / 1e-3)) < 1e-6 for v in values)
    assert np.median(values) < 0.1  # log-uniform, not uniform


def test_randint_upper_exclusive():
    values = draws(randint(1, 5))
    assert all(type(v) is int for v in values)
    assert set(values) == {1, 2, 3, 4}


def test_qrandint_upper_inclusive_and_uniform():
    d = qrandint(0, 10, 5)
    values = draws(d, n=3000)
    assert all(type(v) is int for v in values)
    assert set(values) == {0, 5, 10}
    counts = np.bincount(np.array(values) // 5) / 3000
    assert np.all(np.abs(counts - 1 / 3) < 0.05)  # endpoints are not half as likely
    assert (d.low, d.high, d.upper_inclusive) == (0, 10, True)
    assert set(draws(qrandint(1, 4), n=500)) == {1, 2, 3, 4}  # q defaults to 1


def test_qrandint_bounds_not_multiples():
    assert set(draws(qrandint(1, 11, 3), n=500)) == {3, 6, 9}


def test_lograndint_range_and_skew():
    d = lograndint(1, 1000)
    values = draws(d)
    assert all(type(v) is int and 1 <= v < 1000 for v in values)
    assert (d.low, d.high, d.upper_inclusive) == (1, 999, False)
    assert np.median(values) < 60  # geometric mean ~31.6; uniform would give ~500


def test_qlograndint_multiples_upper_inclusive():
    values = draws(qlograndint(8, 512, 8))
    assert all(type(v) is int and v % 8 == 0 and 8 <= v <= 512 for v in values)
    assert 512 in values


def test_randn_and_qrandn():
    values = draws(randn(5.0, 2.0))
    assert all(type(v) is float for v in values)
    assert abs(np.mean(values) - 5.0) < 0.15
    assert abs(np.std(values) - 2.0) < 0.15
    qvalues = draws(qrandn(0.0, 1.0, 0.25))
    assert all(type(v) is float and (v * 4).is_integer() for v in qvalues)
    assert randn().mean == 0.0 and randn().sd == 1.0


def test_choice_returns_category_objects_uniformly():
    cats = ["relu", "tanh", {"name": "gelu"}]
    values = draws(choice(cats), n=3000)
    assert all(any(v is c for c in cats) for v in values)
    for c in cats:
        assert abs(sum(v is c for v in values) / 3000 - 1 / 3) < 0.05
    assert choice(("a",)).categories == ["a"]


def test_sample_from_spec_access():
    d = sample_from(lambda spec: spec.config.a + spec["config"]["nested"]["b"])
    spec = SampleSpec({"a": 1, "nested": {"b": 2}})
    assert d.sample(np.random.default_rng(0), spec) == 3
    assert sample_from(lambda: 7).sample(np.random.default_rng(0)) == 7
    # a plain dict is taken as the config resolved so far
    assert sample_from(lambda spec: spec.config.nested.b).sample(
        np.random.default_rng(0), {"nested": {"b": 4}}
    ) == 4


def test_attributes_for_exporters():
    f = qloguniform(1e-4, 1e-1, 1e-4)
    assert (f.lower, f.upper, f.log, f.q, f.categories) == (1e-4, 1e-1, True, 1e-4, None)
    i = randint(0, 10)
    assert (i.lower, i.upper, i.log, i.q, i.low, i.high) == (0, 10, False, None, 0, 9)
    c = choice([1, 2])
    assert (c.lower, c.upper, c.log, c.q, c.categories) == (None, None, False, None, [1, 2])
    assert isinstance(uniform(0, 1), Float) and isinstance(randint(0, 2), Integer)
    assert isinstance(randn(), Normal) and isinstance(c, Categorical)
    assert isinstance(sample_from(lambda: 1), Function)


def test_repr_is_the_constructor_call():
    assert repr(uniform(0, 1)) == "uniform(0, 1)"
    assert repr(quniform(0, 1, 0.5)) == "quniform(0, 1, 0.5)"
    assert repr(loguniform(1e-4, 1e-2)) == "loguniform(0.0001, 0.01)"
    assert repr(qrandint(0, 10, 2)) == "qrandint(0, 10, 2)"
    assert repr(lograndint(1, 100)) == "lograndint(1, 100)"
    assert repr(qrandn(0, 1, 0.5)) == "qrandn(0.0, 1.0, 0.5)"
    assert repr(choice(["a", 1])) == "choice(['a', 1])"
    assert uniform(0, 1).domain_str == "uniform(0, 1)"
    assert repr(sample_from(len)) == "sample_from(len)"


def test_is_valid():
    assert uniform(0, 1).is_valid(0.5) and not uniform(0, 1).is_valid(1.0)
    assert quniform(0, 1, 0.25).is_valid(1.0) and not quniform(0, 1, 0.25).is_valid(0.3)
    assert randint(0, 3).is_valid(2) and not randint(0, 3).is_valid(3)
    assert qrandint(0, 10, 5).is_valid(10) and not qrandint(0, 10, 5).is_valid(7)
    assert choice(["a"]).is_valid("a") and not choice(["a"]).is_valid("b")


def test_domains_pickle():
    d = qloguniform(1e-3, 1, 1e-3)
    assert repr(pickle.loads(pickle.dumps(d))) == repr(d)


def test_grid_search_is_a_plain_dict():
    assert grid_search([1, 2]) == {"grid_search": [1, 2]}
    assert grid_search((x for x in "ab")) == {"grid_search": ["a", "b"]}
    assert space.is_grid_search({"grid_search": [1]})
    assert not space.is_grid_search({"grid_search": [1], "other": 2})


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: uniform(5, 1), r"^uniform: lower \(5\) must be < upper \(1\)$"),
        (lambda: uniform(1, 1), r"uniform: lower \(1\) must be < upper \(1\)"),
        (lambda: uniform("a", 1), r"uniform: lower must be a finite number, got 'a'"),
        (lambda: uniform(0, float("inf")), r"uniform: upper must be a finite number"),
        (lambda: quniform(0, 1, 0), r"quniform: q must be > 0, got 0"),
        (lambda: quniform(0, 1, -0.5), r"quniform: q must be > 0, got -0.5"),
        (lambda: quniform(0.1, 0.2, 1), r"quniform: no multiple of q \(1\) lies in"),
        (lambda: loguniform(0, 1), r"^loguniform: lower must be > 0, got 0$"),
        (lambda: loguniform(-1, 1), r"loguniform: lower must be > 0, got -1"),
        (lambda: loguniform(1, 10, base=1), r"loguniform: base must be > 0 and != 1"),
        (lambda: qloguniform(1e-3, 1, 0), r"qloguniform: q must be > 0"),
        (lambda: randint(3, 3), r"randint: lower \(3\) must be < upper \(3\)"),
        (lambda: randint(0.5, 3), r"randint: lower must be an integer, got 0.5"),
        (lambda: randint(0, True), r"randint: upper must be an integer, got True"),
        (lambda: qrandint(0, 10, 0), r"qrandint: q must be a positive integer, got 0"),
        (lambda: qrandint(0, 10, 2.5), r"qrandint: q must be an integer, got 2.5"),
        (lambda: qrandint(1, 4, 5), r"qrandint: no multiple of q \(5\) lies in \[1, 4\]"),
        (lambda: lograndint(0, 10), r"lograndint: lower must be > 0, got 0"),
        (lambda: qlograndint(1, 10, -1), r"qlograndint: q must be a positive integer"),
        (lambda: randn(0, 0), r"^randn: sd must be > 0, got 0$"),
        (lambda: randn(0, -1), r"randn: sd must be > 0, got -1"),
        (lambda: qrandn(0, 1, 0), r"qrandn: q must be > 0, got 0"),
        (lambda: choice([]), r"choice: categories must be a non-empty list"),
        (lambda: choice("abc"), r"choice: categories must be a non-empty list"),
        (lambda: choice({"a": 1}), r"choice: categories must be a non-empty list"),
        (lambda: grid_search([]), r"grid_search: values must be a non-empty list"),
        (lambda: grid_search("ab"), r"grid_search: values must be a non-empty list"),
        (lambda: grid_search(3), r"grid_search: values must be a non-empty list"),
        (lambda: sample_from(3), r"sample_from: func must be callable, got 3"),
    ],
)
def test_bad_arguments_name_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()
