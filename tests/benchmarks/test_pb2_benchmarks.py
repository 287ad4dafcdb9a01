"""The PB2 benchmarks run and print their tables (their figures are the benchmarks' business)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pb2_synthetic_prints_every_system_on_one_seed():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pb2_synthetic.py"), "--seeds", "1", "--no-ray",
                           "--length", "24"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("FIFO", "exploit only", "PBT", "PB2 (ours)"):
        assert f"\n{name} " in proc.stdout, proc.stdout
    assert "PB2 (ours) / PBT, median best final:" in proc.stdout


def test_pb2_cartpole_rejects_bad_flags():
    script = ROOT / "benchmarks" / "pb2_cartpole.py"
    for args, message in ((["--seeds", "0,x"], "--seeds: comma-separated ints, got '0,x'"),
                          (["--budget", "0"], "--budget and --interval: must be >= 1, got 0 and 8192")):
        proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr, proc.stderr
