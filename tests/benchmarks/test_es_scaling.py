"""benchmarks/es_scaling.py runs ES and ARS on a tiny budget in the session's Ray and prints a row."""

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
def test_es_scaling_prints_a_row_per_number_of_actors():
    out = _run("es_scaling.py", "--algos", "ars", "--actors", "1", "--seconds", "0.5", "--pairs", "2")
    assert re.search(r"^\s+1\s+\d+\s+\d+\s+\d+%$", out, re.M), out


def test_bad_flags_are_one_line_naming_them():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "es_scaling.py"), "--algos", "ppo"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "--algos: unknown ['PPO']" in proc.stderr, proc.stderr
