"""The packages pass the type checker configured in pyproject.toml ([tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_nothing():
    # mypy's cache (.mypy_cache) makes a run after the first take about a second
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
