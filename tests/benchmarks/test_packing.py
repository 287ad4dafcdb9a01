"""benchmarks/packing.py runs its packed and unpacked sweeps on a tiny budget in the session's Ray and
prints their rows and ratio."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.scripts import bad_flags_error, run_in_session_ray


@pytest.mark.usefixtures("ray_session")
def test_packing_benchmark_prints_both_rows_and_their_ratio_on_a_tiny_budget():
    out = run_in_session_ray("packing.py", "--members", "2", "--steps", "1024", "--packs", "1")
    for system in ("packed", "unpacked"):
        assert re.search(rf"^  {system} +wall +[\d.]+ s +[\d,]+ env steps/s +[\d,]+ updates/s  mean final return "
                         r"+([\d.]+|nan)$", out, re.M), out
    assert re.search(r"^  unpacked / packed: [\d.]+x wall time; final return", out, re.M), out


@pytest.mark.parametrize("args, message", [(["--systems", "optuna"], "--systems: unknown ['optuna']"),
                                           (["--members", "2", "--packs", "3"], "--packs: at most --members (2), got 3"),
                                           (["--steps", "0"], "--steps: must be > 0, got 0")])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("packing.py", *args)
