"""examples/dqn_defaults_sweep.py: a stage runs through tune.run("DQN") and stops each trial at the
rule; candidates rank by the seeds that met the rule, then by their median env steps."""

from __future__ import annotations

import math

from examples.dqn_defaults_sweep import Outcome, outcome_of, run_stage, summarize


def _history(means):
    return [{"episode_return_mean": m, "env_steps_total": 256 * (i + 1), "time_total_s": float(i)}
            for i, m in enumerate(means)]


def test_the_rule_holds_at_the_first_check_within_the_cap():
    config = {"n_step": 3, "epsilon": [[0, 1.0], [10, 0.05]], "seed": 4}
    late = outcome_of(_history([20.0, 390.0, 401.0]), ["n_step", "epsilon"], config, target=400, max_steps=512)
    assert late.solved_at is None and late.best_mean == 401.0  # at 768 env steps: past the cap
    met = outcome_of(_history([20.0, float("nan"), 400.0, 150.0]), ["n_step"], config, target=400, max_steps=1000)
    assert (met.solved_at, met.best_mean, met.final_steps, met.seed) == (768, 400.0, 1024, 4)
    assert met.candidate == (("n_step", 3),)
    assert late.candidate == (("n_step", 3), ("epsilon", ((0, 1.0), (10, 0.05))))


def test_candidates_rank_by_seeds_met_then_median_env_steps():
    def outcomes(name, steps):
        return [Outcome((("lr", name),), seed, s, 0.0, 0, 0.0) for seed, s in enumerate(steps)]

    ranked = summarize(outcomes(1, [500, None, 700]) + outcomes(2, [900, 800, 950]) + outcomes(3, [100, None, None])
                       + outcomes(4, [300, 400, 2000]))
    assert [s.overrides()["lr"] for s in ranked] == [4, 2, 1, 3]
    assert ranked[0].median_steps == 400 and ranked[2].median_steps == 600
    assert math.isinf(summarize(outcomes(5, [None, None]))[0].median_steps)


def test_a_stage_is_one_tune_run_whose_trials_stop_when_the_rule_holds(ray_session, tmp_path):
    # random play lasts ~22 steps an episode: a rule of 15 holds at the first check (256 env steps)
    outcomes = run_stage("stage", {"epsilon": [[0, 1.0]]}, {"n_step": [1, 3]}, [0], str(tmp_path), max_steps=1024,
                         target=15, verbose=0)
    assert sorted(o.candidate for o in outcomes) == [(("epsilon", ((0, 1.0),)), ("n_step", n)) for n in (1, 3)]
    assert all(o.solved_at == o.final_steps == 256 and o.seed == 0 for o in outcomes)
