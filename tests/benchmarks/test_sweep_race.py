"""The race benchmark runs, on a tiny budget (its speed is checked by its own ``--guard``, not here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.mark.parametrize("search", ["tpe", "random"])
def test_sweep_race_prints_the_table_and_the_profile_on_a_tiny_budget(tmp_path, search):
    env = dict(os.environ, RAY_ADDRESS="auto")  # the session's Ray: no second engine start
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sweep_race.py"), "--systems", "tuner", "--trials", "2",
         "--max-steps", "3000", "--grace", "1000", "--storage", str(tmp_path), "--search", search],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    row = re.search(rf"^tuner \(ours, {search}\)\s+(\S+)\s+([\d.]+)\s+(\d+)/2\s+(\d+)", out, re.M)
    assert row, out
    assert int(row.group(4)) >= 2 * 1000  # both trials sampled at least to the grace period
    assert "where the wall time went" in out and "learning" in out and "sampling" in out
    share = re.search(r"parts add up to ([\d.]+)% of it", out)
    assert share and 90.0 <= float(share.group(1)) <= 110.0, out


def test_sweep_race_rejects_an_unknown_system():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_race.py"), "--systems", "tuner,foo"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert "--systems: unknown ['foo'] (allowed: tuner, optuna, rllib)" in proc.stderr
