"""benchmarks/apex_cartpole.py runs ours on a tiny budget in the session's Ray and prints its row
(RLlib's runs are the benchmark's own business: its figures are not checked here)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_apex_benchmark_prints_ours_on_a_tiny_budget():
    out = run_in_session_ray("apex_cartpole.py", "--systems", "ours", "--seeds", "0", "--quick")
    assert re.search(r"^  APEX ours  seed 0: (not solved in [\d,]+|[\d,]+ steps, [\d.]+ s), [\d,]+ env steps/s$",
                     out, re.M), out
    assert re.search(r"ours  solved [01]/1", out), out


@pytest.mark.parametrize("args, message", [(["--systems", "sb3"], "--systems: unknown ['sb3']"),
                                           (["--seeds", "a"], "--seeds: comma-separated ints, got 'a'"),
                                           (["--max-steps", "0"], "--max-steps: must be > 0, got 0")])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("apex_cartpole.py", *args)
