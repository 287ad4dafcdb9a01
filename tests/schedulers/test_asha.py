"""ASHA: the promotion variant against Li et al. (2018), the default against Ray Tune's stopping rule."""

from __future__ import annotations

import math
import random

import pytest

from schedulers import ASHAScheduler, AsyncHyperBandScheduler, TrialScheduler
from schedulers.asha import rung_milestones
from schedulers.simulator import simulate

ETA = 3
RUNGS = [1, 3, 9, 27]


def ranked_curves(order: list[int]) -> dict[str, list[float]]:
    """27 curves with a known order: trial ``q`` has quality ``q`` (26 is best) at every time,
    added in ``order``."""
    return {f"q{q:02d}": [q * (1 - math.exp(-t / 4)) for t in range(1, 28)] for q in order}


def li_et_al_2018(order: list[int], eta: int, n_rungs: int) -> list[list[str]]:
    """Algorithm 2 of Li et al. (2018), one worker, written from the paper: ``get_job`` promotes
    the first not-yet-promoted config of ``top_k(rung k, floor(|rung k| / eta))``, scanning from
    the highest rung down; otherwise it grows the bottom rung with a new config."""
    rungs: list[dict[str, float]] = [{} for _ in range(n_rungs)]
    promoted: list[set[str]] = [set() for _ in range(n_rungs)]
    arrivals = [f"q{q:02d}" for q in order]
    while True:
        job = None
        for k in reversed(range(n_rungs - 1)):
            top = sorted(rungs[k], key=lambda c: -rungs[k][c])[: len(rungs[k]) // eta]
            promotable = [c for c in top if c not in promoted[k]]
            if promotable:
                promoted[k].add(promotable[0])
                job = (promotable[0], k + 1)
                break
        if job is None:
            if not arrivals:
                break
            job = (arrivals.pop(0), 0)
        config, k = job
        rungs[k][config] = int(config[1:])  # the quality: curves keep their order at every rung
    return [sorted(r) for r in rungs]


def promotion_rungs(order: list[int], n_slots: int = 1) -> list[list[str]]:
    sched = ASHAScheduler(max_t=27, grace_period=1, reduction_factor=ETA, promotion=True)
    res = simulate(sched, ranked_curves(order), n_slots=n_slots, metric="acc", mode="max")
    # Which trials reached each rung, two ways: what the scheduler recorded, what ran.
    recorded = [sorted(ids) for ids in sched.rung_trials().values()]
    assert recorded == [sorted(res.reached(m)) for m in RUNGS]
    return recorded


def names(qs) -> list[str]:
    return sorted(f"q{q:02d}" for q in qs)


def test_promotion_rungs_best_first_is_successive_halving():
    # Arriving best first, ASHA keeps exactly the top 1/eta at every rung: 27, 9, 3, 1.
    rungs = promotion_rungs(list(range(26, -1, -1)))
    assert [len(r) for r in rungs] == [27, 9, 3, 1]
    assert rungs == [names(range(27)), names(range(18, 27)), names(range(24, 27)), names([26])]


def test_promotion_rungs_worst_first_promote_every_newcomer():
    # Arriving worst first, each newcomer is the best so far: from the third arrival on it is in
    # the top floor(n/3) of every rung it reaches (the over-promotion Li et al. discuss).
    rungs = promotion_rungs(list(range(27)))
    assert [len(r) for r in rungs] == [27, 25, 23, 21]
    assert rungs == [names(range(27)), names(range(2, 27)), names(range(4, 27)), names(range(6, 27))]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_promotion_rungs_match_algorithm_2(seed):
    order = list(range(27))
    random.Random(seed).shuffle(order)
    assert promotion_rungs(order) == li_et_al_2018(order, ETA, len(RUNGS))


def test_promotion_pauses_and_resumes_from_the_rung():
    sched = ASHAScheduler(max_t=27, grace_period=1, reduction_factor=ETA, promotion=True)
    assert not sched.never_pauses
    res = simulate(sched, ranked_curves(list(range(26, -1, -1))), n_slots=4, metric="acc", mode="max")
    best = [e for e in res.events if e.trial_id == "q26"]
    assert [(e.kind, e.time) for e in best if e.kind != "result" or e.detail != "CONTINUE"] == [
        ("add", 0), ("start", 0), ("result", 1), ("start", 1), ("result", 3), ("start", 3),
        ("result", 9), ("start", 9), ("result", 27),
    ]
    assert [e.detail for e in best if e.kind == "result" and e.time in RUNGS] == ["PAUSE"] * 3 + ["STOP"]
    # Every resumed trial restarts where it paused, so the budget is what it took to get there.
    assert res.budget_used == sum(res.max_time().values())


def test_promotion_with_parallel_slots_never_promotes_outside_the_top():
    order = list(range(27))
    random.Random(5).shuffle(order)
    sched = ASHAScheduler(max_t=27, grace_period=1, reduction_factor=ETA, promotion=True)
    simulate(sched, ranked_curves(order), n_slots=5, metric="acc", mode="max")
    rungs = sched.rung_trials()
    for lower, upper in zip(RUNGS, RUNGS[1:]):
        assert len(rungs[upper]) <= len(rungs[lower])
        assert set(rungs[upper]) <= set(rungs[lower])
    assert "q26" in rungs[27]  # the best is promoted all the way, whatever the timing


# -- the default: Ray Tune's stopping rule --------------------------------------------------------------


def test_stopping_rule_hand_computed():
    # Cutoff = 66.7th percentile (numpy linear interpolation) of the values recorded so far.
    curves = {f"t{i}": [i * k for k in range(1, 10)] for i in (8, 2, 5, 0, 7, 1, 4, 6, 3)}
    sched = ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3)
    assert sched.never_pauses
    res = simulate(sched, curves, metric="m", mode="max")
    # t8 arrives first everywhere and passes; t7 beats percentile(8,2,5,0)=5 at rung 1 but not
    # percentile(24)=24 at rung 3; t6 beats percentile(8,2,5,0,7,1,4)=5 at rung 1 but not
    # percentile(24,21)=23 at rung 3; everyone else stops at rung 1.
    assert res.reached(1) == list(curves)
    assert res.reached(3) == ["t8", "t7", "t6"]
    assert res.reached(9) == ["t8"]
    assert res.budget_used == 9 + 3 + 3 + 6 * 1
    assert {d for _, _, d in res.decisions} == {"CONTINUE", "STOP"}


def test_stopping_rule_with_27_ranked_trials():
    best_first = simulate(
        ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3), ranked_curves(list(range(26, -1, -1))),
        n_slots=1, metric="acc", mode="max",
    )
    assert [len(best_first.reached(m)) for m in RUNGS] == [27, 1, 1, 1]
    worst_first = simulate(
        ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3), ranked_curves(list(range(27))),
        n_slots=1, metric="acc", mode="max",
    )
    assert [len(worst_first.reached(m)) for m in RUNGS] == [27, 27, 27, 27]


def test_rungs_and_alias():
    assert AsyncHyperBandScheduler is ASHAScheduler
    assert ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3).rung_milestones() == [1, 3, 9, 27]
    assert ASHAScheduler(max_t=100, grace_period=1, reduction_factor=4).rung_milestones() == [1, 4, 16, 64]
    s = ASHAScheduler(max_t=81, grace_period=1, reduction_factor=3, brackets=3)
    assert [s.rung_milestones(b) for b in range(3)] == [[1, 3, 9, 27, 81], [3, 9, 27, 81], [9, 27, 81]]
    # The promotion variant's last rung is max_t itself.
    assert ASHAScheduler(max_t=100, grace_period=1, reduction_factor=3, promotion=True).rung_milestones() == [
        1, 3, 9, 27, 81, 100,
    ]


def test_brackets_are_drawn_from_the_seed():
    def brackets(seed):
        s = ASHAScheduler(metric="m", mode="max", max_t=81, reduction_factor=3, brackets=3, seed=seed)
        for i in range(60):
            s.on_trial_add(None, type("T", (), {"trial_id": f"t{i}"})())
        return [s._trial_bracket[f"t{i}"] for i in range(60)]

    assert brackets(1) == brackets(1)
    assert brackets(1) != brackets(2)
    counts = [brackets(1).count(b) for b in range(3)]
    assert counts[0] > counts[1] > counts[2] > 0  # softmax over 5, 4, 3 rungs


# -- parity with Ray Tune itself, when it is installed ----------------------------------------------------


def random_curves(seed: int, n: int = 20, length: int = 30) -> dict[str, list[float]]:
    rng = random.Random(seed)
    curves = {}
    for i in range(n):
        a, tau = rng.random(), rng.uniform(1, 10)
        curves[f"r{i:02d}"] = [round(a * (1 - math.exp(-t / tau)) + rng.gauss(0, 0.05), 3) for t in range(1, length + 1)]
    return curves


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(max_t=27, grace_period=1, reduction_factor=3),
        dict(max_t=30, grace_period=2, reduction_factor=2),
        dict(max_t=9, grace_period=1, reduction_factor=3, stop_last_trials=False),
        dict(max_t=20, grace_period=0.25, reduction_factor=2),  # one step crosses several rungs
    ],
)
@pytest.mark.parametrize("mode", ["max", "min"])
def test_same_decisions_as_ray_tune(kwargs, mode):
    ray_schedulers = pytest.importorskip("ray.tune.schedulers", exc_type=ImportError)
    for seed in range(3):
        for n_slots in (1, 4):
            curves = random_curves(seed)
            ours = simulate(ASHAScheduler(**kwargs), curves, n_slots=n_slots, metric="m", mode=mode)
            theirs = simulate(
                ray_schedulers.AsyncHyperBandScheduler(**kwargs), curves, n_slots=n_slots, metric="m", mode=mode,
                on_stop="complete",
            )
            assert ours.decisions == theirs.decisions
            assert TrialScheduler.STOP in {d for _, _, d in ours.decisions}


@pytest.mark.parametrize("grace,max_t,rf", [(1, 100, 4), (1, 81, 3), (1, 1000, 10), (2, 50, 3), (0.5, 7, 1.5)])
def test_rungs_are_ray_tunes(grace, max_t, rf):
    async_hyperband = pytest.importorskip("ray.tune.schedulers.async_hyperband", exc_type=ImportError)
    for s in range(3):
        theirs = [m for m, _ in reversed(async_hyperband._Bracket(grace, max_t, rf, s)._rungs)]
        assert rung_milestones(grace, max_t, rf, s) == theirs
