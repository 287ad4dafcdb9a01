"""The scaling benchmark runs on a tiny budget and prints its tables (its figures are not checked here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "benchmarks" / "scaling.py")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)  # the script starts a Ray of its own
    return env


def test_scaling_prints_the_curve_and_the_cpu_costs_on_a_tiny_budget():
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--actors", "1,2", "--seconds", "1", "--idle-seconds", "0.5", "--fast-ms", "1",
         "--batch-per-actor", "32", "--cluster", "single"],
        capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "single node: one PPO trainer in this process" in out, out
    for actors in (1, 2):
        row = re.search(rf"^\s+{actors}\s+([\d,]+)\s+([\d,]+)\s+(\d+)%", out, re.M)
        assert row, out
        assert int(row.group(1).replace(",", "")) > 0
    assert "CPU-ms per 1,000 env steps" in out and "per actor at rest" in out, out
    assert re.search(r"cores saturate at about \d+ actors", out), out


def test_scaling_rejects_bad_flags_naming_them():
    for argv, message in (
        (["--actors", "1,0"], "--actors: every number of actors must be >= 1"),
        (["--actors", "1,two"], "--actors: expected comma-separated integers"),
        (["--seconds", "0"], "--seconds: must be > 0"),
        (["--cluster", "3-node"], "--cluster: invalid choice"),
    ):
        proc = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True, timeout=60,
                              env=_env(), cwd=ROOT)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr, proc.stderr
