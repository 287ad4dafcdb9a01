"""The tuning-quality benchmark runs ours on a tiny budget and prints its table (its figures are the
benchmark's business, not this test's); bad flags are one line naming the flag."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "tuning_quality.py"


@pytest.mark.usefixtures("ray_session")
def test_tuning_quality_sweeps_then_checks_the_answer_on_fresh_seeds_on_a_tiny_budget():
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray (2 CPUs)
    args = ["--tasks", "doorkey", "--systems", "tuner", "--trials", "2", "--max-steps", "2048", "--grace", "1024",
            "--eval-every", "1024", "--eval-episodes", "1", "--fresh-seeds", "2"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "doorkey: MiniGrid-DoorKey-5x5-v0, 2 trials x 2,048 env steps" in out, out
    row = re.search(r"^\s+tuner \(ours\)\s+0\s+([\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]\s+(-?[\d.]+)"
                    r"\s+([\d.]+)\s+lr ", out, re.M)
    assert row, out
    iqm, low, high = (float(row.group(i)) for i in (3, 4, 5))
    assert 0.0 <= low <= iqm <= high <= 1.0, out  # DoorKey's returns lie in [0, 1]


@pytest.mark.parametrize("args, message", [
    (["--tasks", "pong"], "--tasks: unknown ['pong']; allowed: ['doorkey', 'halfcheetah']"),
    (["--fresh-seeds", "1"], "--fresh-seeds: must be >= 2"),
    (["--tasks", "doorkey", "--eval-every", "1000"], "--eval-every: must be a multiple of the train batch (1024)"),
])
def test_tuning_quality_rejects_bad_flags_naming_them(args, message):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
