"""The slow-simulator benchmark runs ours on a tiny budget and prints its table (its figures are
the benchmark's business, not this test's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "slow_sim.py"


@pytest.mark.usefixtures("ray_session")
def test_slow_sim_prints_our_row_and_profile_on_a_tiny_budget(tmp_path):
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray: no second engine start
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--systems", "tuner", "--storage", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "2 PPO trials" in out and "2 envs per trial" in out, out
    # sweep s, Ray start s, env steps, env steps/s, of ideal, of ideal with Ray up, return, ratios
    row = re.search(r"^tuner \(ours\)\s+([\d.]+)\s+([\d.]+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)"
                    r"\s+1\.00\s+1\.00", out, re.M)
    assert row, out
    assert int(row.group(3).replace(",", "")) >= 2 * 1000  # both trials ran to their stop
    assert float(row.group(6)) >= float(row.group(5))  # leaving Ray's start out never lowers the fraction
    assert float(row.group(7)) > 0  # a 100-episode return at equal steps
    assert "where the wall time went" in out and "sampling" in out and "learning" in out, out
    assert "ours per iteration: the first" in out, out


def test_slow_sim_rejects_bad_flags():
    for args, message in ((["--systems", "tuner,foo"], "--systems: unknown ['foo'] (allowed: tuner, optuna, rllib)"),
                          (["--slow-prob", "1.5"], "--slow-prob: must be a probability in [0, 1], got 1.5"),
                          (["--envs", "0"], "argument --envs: must be >= 1, got 0"),
                          (["--ray-cpus", "4"], "--ray-cpus: 4 CPUs cannot hold one trial of 9 CPUs")):
        proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr, proc.stderr
