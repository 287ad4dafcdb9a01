"""benchmarks/impala_cartpole.py runs ours on a tiny budget in the session's Ray and prints its row
(RLlib's runs are the benchmark's own business: its figures are not checked here)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_impala_benchmark_prints_ours_on_a_tiny_budget():
    out = run_in_session_ray("impala_cartpole.py", "--systems", "ours", "--algos", "impala", "--seeds", "0", "--quick")
    assert re.search(r"^  IMPALA ours  seed 0: not solved in [\d,]+, [\d,]+ env steps/s$", out, re.M), out
    assert "ours  solved 0/1" in out, out


def test_bad_flags_are_one_line_naming_them():
    assert "unknown ['DQN']" in bad_flags_error("impala_cartpole.py", "--algos", "dqn")
