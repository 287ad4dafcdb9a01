"""benchmarks/impala_cartpole.py runs ours on a tiny budget in the session's Ray and prints its row
(RLlib's runs are the benchmark's own business: its figures are not checked here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    import ray

    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.usefixtures("ray_session")
def test_impala_benchmark_prints_ours_on_a_tiny_budget():
    out = _run("impala_cartpole.py", "--systems", "ours", "--algos", "impala", "--seeds", "0", "--quick")
    assert re.search(r"^  IMPALA ours  seed 0: not solved in [\d,]+, [\d,]+ env steps/s$", out, re.M), out
    assert "ours  solved 0/1" in out, out


def test_bad_flags_are_one_line_naming_them():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "impala_cartpole.py"), "--algos", "dqn"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "unknown ['DQN']" in proc.stderr, proc.stderr
