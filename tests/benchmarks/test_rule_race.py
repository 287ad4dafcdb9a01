"""The race to a return rule's report: the paired interval of env steps over the seeds both systems solved."""

from __future__ import annotations

from benchmarks.peers.rule_race import _paired_steps


def test_the_paired_interval_of_env_steps_uses_the_seeds_both_solved():
    runs = lambda steps: [{"steps": s} for s in steps]  # noqa: E731
    line = _paired_steps(runs([100, 200, 400, None]), runs([100, 200, 400, 300]))
    assert line == ("per-seed env steps, ours / SB3, over the 3 seeds both solved: geometric mean 1.000, "
                    "95% interval 1.00-1.00")
    # ratios 1.1 and 1/1.1: geometric mean 1, and with two seeds t = 12.71 on the log ratios' spread
    line = _paired_steps(runs([110, 100]), runs([100, 110]))
    assert "over the 2 seeds both solved: geometric mean 1.000, 95% interval 0.30-3.36" in line, line
    assert "fewer than two" in _paired_steps(runs([100, None]), runs([None, 100]))
