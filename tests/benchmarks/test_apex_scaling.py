"""benchmarks/apex_scaling.py runs ours on a tiny budget in the session's Ray and prints a row
(RLlib's DQN beside it is the benchmark's own business)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_apex_scaling_prints_a_row_per_number_of_actors():
    out = run_in_session_ray("apex_scaling.py", "--systems", "ours", "--actors", "2", "--seconds", "1")
    assert re.search(r"^\s+2\s+\d+\s+\d+\s+\d+%$", out, re.M), out


@pytest.mark.parametrize("args, message", [(["--systems", "sb3"], "--systems: unknown ['sb3']"),
                                           (["--actors", "1,0"], "--actors: every value must be >= 1, got '1,0'"),
                                           (["--seconds", "0"], "--seconds: must be > 0, got 0.0")])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("apex_scaling.py", *args)
