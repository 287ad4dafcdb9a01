"""The elastic-ASHA benchmark runs its elastic sweep on a tiny budget and prints its table (its figures
are the benchmark's business, not this test's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "elastic_asha.py"


@pytest.mark.usefixtures("ray_session")
def test_elastic_asha_prints_the_elastic_sweep_on_a_tiny_budget():
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray (2 CPUs)
    # The elastic sweep alone: the fixed one is a plain ASHA sweep, which other tests run.
    args = ["--modes", "elastic", "--trials", "4", "--envs", "1", "--ray-cpus", "2", "--learner-cpus", "0.25", "--batch", "128",
            "--grace", "256", "--max-t", "640", "--fast-ms", "0.5", "--slow-prob", "0"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "4 PPO trials x 1 rollout actors" in out, out
    row = re.search(r"^\s*elastic\s+([\d.]+)\s+([\d,]+)\s+(\d+)\s+([\d.]+)%", out, re.M)
    assert row and int(row.group(2).replace(",", "")) >= 4 * 256, out  # every trial reached the rung


def test_elastic_asha_rejects_bad_flags():
    for args, message in ((["--trials", "6"], "--trials: a multiple of 4"),
                          (["--rf", "1"], "--rf: must be > 1, got 1.0"),
                          (["--max-t", "100"], "--max-t: must be above --grace (2048), got 100"),
                          (["--modes", "fixed,foo"], "--modes: a comma-separated list of ['fixed', 'elastic']"),
                          (["--ray-cpus", "4"], "--ray-cpus: 4 CPUs over 8 trials leave nothing")):
        proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr, proc.stderr
