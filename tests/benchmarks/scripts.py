"""Running a benchmark script from a smoke test: in the session's Ray (no second engine start), or
for its argument errors alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_in_session_ray(script: str, *args: str) -> str:
    """``benchmarks/<script> args`` joined to this test session's Ray; its stdout (it must exit 0)."""
    import ray

    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def bad_flags_error(script: str, *args: str) -> str:
    """The stderr of ``benchmarks/<script> args``, which must exit 2 (argparse's error)."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    return proc.stderr
