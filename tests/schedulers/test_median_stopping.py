"""The median stopping rule: hand-computed decisions, yielding, soft stops, parity with Ray Tune."""

from __future__ import annotations

import math
import random

import pytest

from schedulers import MedianStoppingRule, TrialScheduler
from schedulers.simulator import simulate

INF = float("inf")


def rule(**kwargs) -> MedianStoppingRule:
    kwargs.setdefault("time_attr", "training_iteration")
    kwargs.setdefault("grace_period", 2)
    return MedianStoppingRule(**kwargs)


@pytest.mark.parametrize("mode,sign", [("max", 1), ("min", -1)])
def test_hand_computed_stop(mode, sign):
    # One slot, never yielding: a, b, c run to the end unjudged (fewer than 3 others), then d and
    # e are judged at t=2 against the median of the others' running averages from t=2 on.
    curves = {
        "a": [0, 1, 1, 1, 1],  # running average at t=2: 1.0
        "b": [0, 2, 2, 2, 2],  # 2.0
        "c": [0, 3, 3, 3, 9],  # 3.0
        "d": [5, 1.5, 1.5, 1.5, 1.5],  # median(1, 2, 3) = 2 but its best is 5 (t=1 counts): goes on
        "e": [1.7, 1.7, 1.7, 1.7, 1.7],  # median(1, 2, 3, 1.5) = 1.75 > 1.7: stopped at t=2
    }
    curves = {k: [sign * v for v in c] for k, c in curves.items()}
    res = simulate(rule(min_time_slice=INF), curves, n_slots=1, metric="m", mode=mode)
    assert res.max_time() == {"a": 5, "b": 5, "c": 5, "d": 5, "e": 2}
    assert [d for t, _, d in res.decisions if t == "e"] == ["CONTINUE", "STOP"]
    curves["e"] = [sign * 1.8] * 5
    res = simulate(rule(min_time_slice=INF), curves, n_slots=1, metric="m", mode=mode)
    assert res.max_time()["e"] == 5


def test_min_samples_required():
    curves = {"a": [1.0] * 5, "b": [2.0] * 5, "c": [0.0] * 5}
    res = simulate(rule(min_samples_required=2, min_time_slice=INF), curves, metric="m", mode="max")
    assert res.max_time()["c"] == 2  # two others: enough
    res = simulate(rule(min_samples_required=3, min_time_slice=INF), curves, metric="m", mode="max")
    assert res.max_time()["c"] == 5  # not enough: never judged


def test_only_trials_that_got_as_far_count():
    # "short" stopped at t=3 by its own curve's end; at t=4 it does not count any more.
    curves = {"a": [1.0] * 6, "b": [1.0] * 6, "short": [9.0] * 3, "c": [0.5] * 6}
    res = simulate(rule(min_samples_required=3, min_time_slice=INF), curves, metric="m", mode="max")
    assert [d for t, _, d in res.decisions if t == "c"] == ["CONTINUE", "STOP"]  # judged at t=2
    res = simulate(rule(grace_period=4, min_samples_required=3, min_time_slice=INF), curves, metric="m", mode="max")
    assert res.max_time()["c"] == 6  # from t=4 only a and b count


def test_never_pauses_only_when_it_cannot():
    assert rule(min_time_slice=INF).never_pauses
    assert not rule().never_pauses  # yields its slot to waiting trials, as in Ray Tune
    assert not rule(hard_stop=False, min_time_slice=INF).never_pauses


def test_yields_to_waiting_trials_until_enough_samples():
    curves = {f"t{i}": [float(i)] * 6 for i in range(6)}
    res = simulate(rule(min_time_slice=1), curves, n_slots=2, metric="m", mode="max")
    # t0 and t1 reach the grace period first, with nobody to compare to and t2.. waiting: they
    # yield; t3 then has three others behind it at t=2 and is judged (and kept).
    assert res.decisions[:5] == [
        ("t0", 1, "CONTINUE"), ("t1", 1, "CONTINUE"), ("t0", 2, "PAUSE"), ("t1", 2, "PAUSE"), ("t2", 1, "CONTINUE"),
    ]
    assert ("t3", 2, "CONTINUE") in res.decisions
    assert {t for t, _, d in res.decisions if d == "STOP"} == {"t1", "t2"}
    # Never yielding, the first trials run to the end before anyone is judged.
    res = simulate(rule(min_time_slice=INF), curves, n_slots=2, metric="m", mode="max")
    assert TrialScheduler.PAUSE not in {d for _, _, d in res.decisions}
    assert res.max_time()["t0"] == 6


def test_soft_stop_pauses_then_runs_fifo():
    curves = {"a": [1.0] * 5, "b": [2.0] * 5, "c": [3.0] * 5, "bad": [0.0] * 5, "late": [4.0] * 5}
    res = simulate(rule(hard_stop=False, min_time_slice=INF), curves, n_slots=1, metric="m", mode="max")
    bad = [(time, d) for t, time, d in res.decisions if t == "bad"]
    assert bad == [(1, "CONTINUE"), (2, "PAUSE"), (3, "CONTINUE"), (4, "CONTINUE"), (5, "CONTINUE")]
    assert res.max_time()["bad"] == 5  # resumed once nothing else waited


# -- parity with Ray Tune itself, when it is installed ----------------------------------------------------


def dyadic_curves(seed: int, n: int = 12, length: int = 20) -> dict[str, list[float]]:
    """Values that are multiples of 1/16, so every sum is exact whatever the summation order."""
    rng = random.Random(seed)
    curves = {}
    for i in range(n):
        a, tau = rng.random(), rng.uniform(1, 8)
        curves[f"r{i:02d}"] = [
            round(16 * (a * (1 - math.exp(-t / tau)) + rng.gauss(0, 0.1))) / 16 for t in range(1, rng.randint(8, length))
        ]
    return curves


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(grace_period=2),
        dict(grace_period=3, min_samples_required=2, min_time_slice=3),
        dict(grace_period=1, hard_stop=False),
        dict(grace_period=2, min_time_slice=INF),
    ],
)
@pytest.mark.parametrize("mode", ["max", "min"])
def test_same_decisions_as_ray_tune(kwargs, mode):
    ray_schedulers = pytest.importorskip("ray.tune.schedulers", exc_type=ImportError)
    for seed in range(3):
        for n_slots in (1, 3):
            curves = dyadic_curves(seed)
            ours = simulate(rule(**kwargs), curves, n_slots=n_slots, metric="m", mode=mode)
            theirs = simulate(
                ray_schedulers.MedianStoppingRule(time_attr="training_iteration", **kwargs), curves,
                n_slots=n_slots, metric="m", mode=mode, on_stop="complete",
            )
            assert ours.decisions == theirs.decisions
