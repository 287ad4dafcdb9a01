"""The validation's plan (candidates, held-out seeds, the follow-on spec) and its statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.analysis import TrialRecord
from tuner.cli import spec as spec_mod
from tuner.held_out.plan import (
    FIRST_HELD_OUT_SEED,
    ValidationPlan,
    check_request,
    held_out_seeds,
    pick_candidates,
    validation_document,
)
from tuner.held_out.report import bootstrap_ci, iqm, make_report


def _trial(index, config, score, status="TERMINATED"):
    return TrialRecord(trial_id=f"t{index}", index=index, config=config, status=status,
                       last_result={} if score is None else {"score": score, "nested": {"score": score}},
                       error=None, num_failures=0, checkpoint_path=None)


def test_held_out_seeds_skip_every_seed_the_sweep_used():
    assert held_out_seeds(set(), 3) == [FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + 1, FIRST_HELD_OUT_SEED + 2]
    assert held_out_seeds({FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + 2}, 2) == [FIRST_HELD_OUT_SEED + 1,
                                                                              FIRST_HELD_OUT_SEED + 3]


def test_a_config_run_on_several_seeds_is_one_candidate_ranked_by_its_mean():
    trials = [
        _trial(0, {"x": 1, "seed": 0}, 10.0), _trial(1, {"x": 1, "seed": 1}, 2.0),  # x=1: mean 6
        _trial(2, {"x": 2, "seed": 0}, 7.0), _trial(3, {"x": 2, "seed": 1}, 7.0),  # x=2: mean 7
        _trial(4, {"x": 3, "seed": 0}, 99.0, status="ERROR"),  # not finished: not a candidate
        _trial(5, {"x": 4, "seed": 0}, float("nan")),  # no finite score: not a candidate
        _trial(6, {"x": 5, "seed": 0}, 1.0),
    ]
    best = pick_candidates(trials, "score", "max", 2)
    assert [(c.rank, c.config, c.score, c.trial_ids) for c in best] == [
        (1, {"x": 2}, 7.0, ("t2", "t3")), (2, {"x": 1}, 6.0, ("t0", "t1"))]
    assert [c.config for c in pick_candidates(trials, "nested/score", "min", 1)] == [{"x": 5}]


def test_no_finished_trial_is_one_error():
    with pytest.raises(ValueError, match="validate: no trial of the sweep finished .* with a finite 'score'"):
        pick_candidates([_trial(0, {"x": 1}, None), _trial(1, {"x": 2}, 3.0, status="ERROR")], "score", "max", 3)


@pytest.mark.parametrize("top_k, seeds, match", [(0, 3, "top_k must be an int >= 1"), (2, 0, "seeds must be an int >= 1"),
                                                 (2, 1.5, "seeds must be an int"), (True, 3, "top_k")])
def test_bad_requests_name_their_argument(top_k, seeds, match):
    with pytest.raises(ValueError, match=match):
        check_request(top_k, seeds)


def test_the_follow_on_spec_runs_each_candidate_on_each_seed_and_nothing_else():
    trials = [_trial(0, {"x": 1, "model": {"w": 2}, "seed": 0}, 5.0),
              _trial(1, {"x": 2, "model": {"w": 3, "d": 1}, "seed": 1}, 9.0)]
    plan = ValidationPlan(sweep="s", metric="score", mode="max", candidates=tuple(pick_candidates(trials, "score",
                          "max", 2)), seeds=(10_000, 10_001))
    base = {"trainable": "tests.tuner.held_out.trainables:noisy", "stop": {"training_iteration": 2},
            "scheduler": "asha", "search": {"type": "optuna"}, "num_samples": 50, "time_budget_s": 5}
    document = validation_document(plan, base, "s-validation")
    assert "scheduler" not in document and "time_budget_s" not in document
    spec = spec_mod.validate(document)
    from tuner.search.setup import planned_trials
    from tuner.run_options import RunOptions

    options = RunOptions(**spec.run_kwargs())
    assert planned_trials(options) == 4
    searcher = options.search_alg
    configs = [searcher.suggest(str(i)) for i in range(4)]
    assert configs == [{"x": 2, "model": {"w": 3, "d": 1}, "seed": 10_000}, {"x": 2, "model": {"w": 3, "d": 1},
                       "seed": 10_001}, {"x": 1, "model": {"w": 2}, "seed": 10_000},
                       {"x": 1, "model": {"w": 2}, "seed": 10_001}]
    assert searcher.suggest("4") == "FINISHED"


def test_iqm_and_its_interval():
    values = [1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0]
    assert iqm(values) == pytest.approx(np.mean([3.0, 4.0, 5.0, 6.0]))  # the middle half of the sorted eight
    low, high = bootstrap_ci(values)
    assert low <= iqm(values) <= high and low >= 1.0 and high <= 100.0
    assert bootstrap_ci(values) == (low, high)  # seeded: the same interval every time
    assert all(math.isnan(v) for v in bootstrap_ci([3.0])) and bootstrap_ci([2.0, 2.0]) == (2.0, 2.0)


def test_the_report_ranks_candidates_again_on_the_held_out_seeds():
    sweep = [_trial(0, {"x": 1, "seed": 0}, 9.0), _trial(1, {"x": 2, "seed": 0}, 8.0)]
    plan = ValidationPlan(sweep="s", metric="score", mode="max",
                          candidates=tuple(pick_candidates(sweep, "score", "max", 2)), seeds=(10_000, 10_001, 10_002))
    held_out = [_trial(0, {}, 1.0), _trial(1, {}, 2.0), _trial(2, {}, 3.0),  # the sweep's best: worse here
                _trial(3, {}, 5.0), _trial(4, {}, 6.0), _trial(5, {}, None, status="RUNNING")]
    report = make_report("s-validation", plan, held_out)
    first, second = report.configs
    assert (first.sweep_rank, first.held_out_rank, first.scores, first.mean) == (1, 2, (1.0, 2.0, 3.0), 2.0)
    assert (second.sweep_rank, second.held_out_rank, second.scores, second.seeds_done) == (2, 1, (5.0, 6.0), 2)
    assert report.best is second and report.best_config == {"x": 2} and not report.complete
