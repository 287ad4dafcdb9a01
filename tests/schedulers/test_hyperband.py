"""HyperBand: the bracket plan of Li et al. (2017) and the synchronous pause/resume mechanics."""

from __future__ import annotations

import math
import random

import pytest

from schedulers import HyperBandScheduler, TrialScheduler
from schedulers.hyperband import hyperband_plan
from schedulers.simulator import simulate

# Li et al. (2017), Table 1: R = 81, eta = 3. Per bracket s, the (n_i, r_i) of each round.
LI_ET_AL_TABLE_1 = {
    4: [(81, 1), (27, 3), (9, 9), (3, 27), (1, 81)],
    3: [(34, 3), (11, 9), (3, 27), (1, 81)],
    2: [(15, 9), (5, 27), (1, 81)],
    1: [(8, 27), (2, 81)],
    0: [(5, 81)],
}


def test_plan_matches_li_et_al_table_1():
    plan = HyperBandScheduler(max_t=81, reduction_factor=3).plan()
    assert [b["s"] for b in plan] == [4, 3, 2, 1, 0]  # s_max = 4, most aggressive bracket first
    assert [b["n"] for b in plan] == [81, 34, 15, 8, 5]
    assert [b["r"] for b in plan] == [1, 3, 9, 27, 81]
    assert {b["s"]: b["rounds"] for b in plan} == LI_ET_AL_TABLE_1


def test_plan_formulas_for_other_budgets():
    # n = ceil((s_max + 1) / (s + 1) * eta**s), r = max_t * eta**-s, n_i = floor(n * eta**-i)
    plan = hyperband_plan(27, 3)
    assert [(b["n"], b["r"]) for b in plan] == [(27, 1), (12, 3), (6, 9), (4, 27)]
    assert plan[1]["rounds"] == [(12, 3), (4, 9), (1, 27)]
    plan = hyperband_plan(16, 2)
    assert [(b["n"], b["r"]) for b in plan] == [(16, 1), (10, 2), (7, 4), (5, 8), (5, 16)]
    plan = hyperband_plan(100, 3)  # s_max = floor(log3(100)) = 4; budgets are not integers
    assert [b["n"] for b in plan] == [81, 34, 15, 8, 5]
    assert plan[0]["r"] == pytest.approx(100 / 81) and plan[0]["rounds"][-1][1] == 100


def ranked(order: list[int], length: int = 81) -> dict[str, list[float]]:
    """Curves that keep their order at every time: trial ``q`` has quality ``q``."""
    return {f"q{q:03d}": [q * (1 - math.exp(-t / 10)) for t in range(1, length + 1)] for q in order}


@pytest.mark.parametrize("n_slots", [1, 7])
def test_one_band_of_143_trials_runs_the_table(n_slots):
    order = list(range(143))
    random.Random(0).shuffle(order)
    curves = ranked(order)
    sched = HyperBandScheduler(max_t=81, reduction_factor=3)
    res = simulate(sched, curves, n_slots=n_slots, metric="acc", mode="max")
    max_time = res.max_time()
    brackets = sched.brackets()
    assert [(b["s"], len(b["trials"])) for b in brackets] == [(4, 81), (3, 34), (2, 15), (1, 8), (0, 5)]
    expected_budget = 0
    for bracket in brackets:
        trials = bracket["trials"]
        by_quality = sorted(trials, key=lambda t: -int(t[1:]))
        previous_r = 0
        for n_i, r_i in LI_ET_AL_TABLE_1[bracket["s"]]:
            reached = [t for t in trials if max_time[t] >= r_i]
            assert len(reached) == n_i, (bracket["s"], r_i)
            assert sorted(reached) == sorted(by_quality[:n_i])  # the best n_i of the bracket
            expected_budget += n_i * (r_i - previous_r)  # resumed trials go on from their rung
            previous_r = r_i
    assert res.budget_used == expected_budget == sum(max_time.values())
    # Losers wait PAUSED at the rung; all but the last to report are stopped by stop_trial.
    stopped_while_paused = {e.trial_id for e in res.events if e.kind == "stop_trial"}
    stopped_by_decision = {e.trial_id for e in res.events if e.kind == "result" and e.detail == "STOP"}
    assert len(stopped_while_paused) > len(stopped_by_decision) > 0
    assert len(stopped_while_paused | stopped_by_decision) == 143


def test_brackets_fill_in_order_then_a_new_band_starts():
    sched = HyperBandScheduler(metric="m", mode="max", max_t=9, reduction_factor=3)
    for i in range(9 + 5 + 3 + 2):
        sched.on_trial_add(None, type("T", (), {"trial_id": f"t{i:02d}"})())
    assert [(b["band"], b["s"], len(b["trials"])) for b in sched.brackets()] == [
        (0, 2, 9), (0, 1, 5), (0, 0, 3), (1, 2, 2),
    ]


def test_a_trial_that_ends_early_does_not_strand_its_bracket():
    # max_t=9, eta=3: bracket s=2 holds 9 trials, rounds (9, 1), (3, 3), (1, 9). The best trial
    # ends by itself at t=2, in the middle of round 2: the two others waiting at t=3 go on.
    curves = ranked(list(range(9)), length=12)
    curves["q008"] = curves["q008"][:2]
    sched = HyperBandScheduler(max_t=9, reduction_factor=3)
    res = simulate(sched, curves, n_slots=3, metric="acc", mode="max")
    max_time = res.max_time()
    assert max_time["q008"] == 2 and ("complete", "q008") in {(e.kind, e.trial_id) for e in res.events}
    assert sorted(t for t, m in max_time.items() if m >= 3) == ["q006", "q007"]
    assert [t for t, m in max_time.items() if m >= 9] == ["q007"]


def test_survivors_run_on_without_stop_last_trials():
    curves = ranked(list(range(9)), length=15)
    res = simulate(HyperBandScheduler(max_t=9, reduction_factor=3, stop_last_trials=False), curves,
                   n_slots=2, metric="acc", mode="max")
    assert [t for t, m in res.max_time().items() if m >= 9] == ["q008"]
    assert res.max_time()["q008"] == 15  # to the end of its curve
    assert ("complete", "q008") in {(e.kind, e.trial_id) for e in res.events}


def test_min_mode_keeps_the_lowest():
    res = simulate(HyperBandScheduler(max_t=9, reduction_factor=3), ranked(list(range(9)), length=9), n_slots=3,
                   metric="loss", mode="min")
    assert sorted(t for t, m in res.max_time().items() if m >= 3) == ["q000", "q001", "q002"]
    assert [t for t, m in res.max_time().items() if m >= 9] == ["q000"]


def test_pauses_and_is_synchronous():
    sched = HyperBandScheduler(max_t=9, reduction_factor=3)
    assert not sched.never_pauses
    res = simulate(sched, ranked(list(range(9)), length=9), n_slots=9, metric="acc", mode="max")
    decisions = [(t, d) for t, time, d in res.decisions if time == 1]
    # Round 1: eight trials pause at t=1; the ninth, last to arrive, settles the round.
    assert [d for _, d in decisions[:8]] == [TrialScheduler.PAUSE] * 8
    assert decisions[8][1] in (TrialScheduler.STOP, TrialScheduler.CONTINUE)
