"""The packages pass the type checker configured in pyproject.toml ([tool.mypy]).

mypy takes the better part of a minute in a fresh clone (no .mypy_cache), all of it CPU, while
most of the suite waits on Ray and subprocesses: so it starts when the session has collected this
test (``tests/conftest.py``), at low priority, and this test only waits for its answer.
"""

from __future__ import annotations

import pytest

import os
import subprocess
import sys
from pathlib import Path

pytestmark = pytest.mark.slow  # `make check` runs mypy itself

ROOT = Path(__file__).resolve().parent.parent

_running: subprocess.Popen | None = None


def start_mypy() -> None:
    """Start mypy in the background (once), at low priority."""
    global _running
    if _running is None:
        _running = subprocess.Popen([sys.executable, "-m", "mypy"], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, preexec_fn=lambda: os.nice(10))


def test_mypy_finds_nothing():
    start_mypy()  # a no-op when the session started it already
    assert _running is not None
    out, _ = _running.communicate(timeout=600)
    assert _running.returncode == 0, out
