"""The packages pass the type checker configured in pyproject.toml ([tool.mypy]).

mypy takes the better part of a minute in a fresh clone (no .mypy_cache), all of it CPU, while
most of the suite waits on Ray and subprocesses: so it starts as soon as a process of the session
has collected this test (``tests/conftest.py``; with xdist the first worker to get there, the
others find it started), at low priority, and this test only waits for its answer, which mypy
leaves in the session's home.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # `make check` runs mypy itself

ROOT = Path(__file__).resolve().parent.parent


def _files() -> tuple[Path, Path, Path]:
    home = Path(os.environ["TUNER_TEST_HOME"])  # the session's, shared by its xdist workers
    return home / "mypy.started", home / "mypy.out", home / "mypy.rc"


def start_mypy() -> None:
    """Start mypy in the background, once per session (the first process to ask), at low priority;
    its output and exit status go to the session's home."""
    started, out, rc = _files()
    try:
        os.close(os.open(started, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    # the status is renamed into place: a reader never sees it half-written
    script = f'"{sys.executable}" -m mypy > "{out}" 2>&1; echo $? > "{rc}.partial"; mv "{rc}.partial" "{rc}"'
    subprocess.Popen(["sh", "-c", script], cwd=ROOT, preexec_fn=lambda: os.nice(10))


def test_mypy_finds_nothing():
    start_mypy()  # a no-op when the session started it already
    _, out, rc = _files()
    deadline = time.monotonic() + 600
    while not rc.exists():  # mypy's exit, wherever in the session it was started
        assert time.monotonic() < deadline, "mypy did not finish within 10 minutes"
        time.sleep(0.2)
    assert rc.read_text().strip() == "0", out.read_text()
