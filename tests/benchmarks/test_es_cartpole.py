"""benchmarks/es_cartpole.py runs ours on a tiny budget in the session's Ray and prints its row
(EvoTorch's runs are the benchmark's own business: its figures are not checked here)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_es_benchmark_prints_ours_on_a_tiny_budget():
    out = run_in_session_ray("es_cartpole.py", "--systems", "ours", "--seeds", "0", "--workers", "1", "--quick")
    assert re.search(r"^  ES ours     seed 0: not solved in [\d,]+, [\d,]+ env steps/s$", out, re.M), out
    assert "ours  solved 0/1" in out, out


@pytest.mark.parametrize("args, message", [(["--systems", "rllib"], "--systems: unknown ['rllib']"),
                                           (["--workers", "0"], "--workers: must be > 0, got 0"),
                                           (["--seeds", "x"], "--seeds: comma-separated ints, got 'x'")])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("es_cartpole.py", *args)
