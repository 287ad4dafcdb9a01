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


def test_bad_flags_are_one_line_naming_them():
    assert "--systems: unknown ['sb3']" in bad_flags_error("apex_scaling.py", "--systems", "sb3")
