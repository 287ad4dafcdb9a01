"""benchmarks/packing.py runs one small pack on a tiny budget in the session's Ray and prints its row
(the unpacked sweep beside it is the benchmark's own business)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_packing_benchmark_prints_a_packed_row_on_a_tiny_budget():
    out = run_in_session_ray("packing.py", "--members", "3", "--steps", "2048", "--packs", "1", "--systems", "packed")
    assert re.search(r"^  packed   wall +[\d.]+ s +[\d,]+ env steps/s +[\d,]+ updates/s  mean final return +[\d.]+$",
                     out, re.M), out


@pytest.mark.parametrize("args, message", [(["--systems", "optuna"], "--systems: unknown ['optuna']"),
                                           (["--members", "2", "--packs", "3"], "--packs: at most --members (2), got 3"),
                                           (["--steps", "0"], "--steps: must be > 0, got 0")])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("packing.py", *args)
