"""benchmarks/es_scaling.py runs ES and ARS on a tiny budget in the session's Ray and prints a row."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_es_scaling_prints_a_row_per_number_of_actors():
    out = run_in_session_ray("es_scaling.py", "--algos", "ars", "--actors", "1", "--seconds", "0.5", "--pairs", "2")
    assert re.search(r"^\s+1\s+\d+\s+\d+\s+\d+%$", out, re.M), out


@pytest.mark.parametrize("args, message", [(["--algos", "ppo"], "--algos: unknown ['PPO']"),
                                           (["--pairs", "0"], "--pairs: must be > 0, got 0"),
                                           (["--actors", "x"], "--actors: comma-separated ints, got 'x'")])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("es_scaling.py", *args)
