"""The race benchmark runs, on a tiny budget (its speed is checked by its own ``--guard``, not here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.mark.parametrize("search", ["tpe", "random"])
def test_sweep_race_prints_the_table_and_the_profile_on_a_tiny_budget(tmp_path, search):
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray: no second engine start
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


def test_guard_holds_ours_to_the_fastest_peer():
    """The bar is the best (fastest) peer's: a slower peer's larger solved count does not set it."""
    from benchmarks.sweep_race import Outcome, guard

    ours = Outcome("tuner", first_solve_s=15.0, sweep_s=36.9, solved=7, trials=16, env_steps=670_170)
    optuna = Outcome("Optuna + SB3", first_solve_s=37.2, sweep_s=184.2, solved=5, trials=16, env_steps=705_664)
    rllib = Outcome("Ray Tune + RLlib", first_solve_s=61.9, sweep_s=675.8, solved=9, trials=16, env_steps=461_824)
    assert guard([ours, optuna, rllib]) == []
    slow = Outcome("tuner", first_solve_s=30.0, sweep_s=70.0, solved=4, trials=16, env_steps=1)
    assert guard([slow, optuna, rllib]) == [
        "sweep 70.0 s > a third of Optuna + SB3's 184.2 s",
        "first solve 30.0 s > two thirds of Optuna + SB3's 37.2 s",
        "solved 4 < Optuna + SB3's 5",
    ]
    assert guard([ours]) == ["no peer ran: nothing to compare against"]
