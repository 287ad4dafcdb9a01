"""A sweep's status never lies: a driver killed without a word (SIGKILL) leaves its sweep RUNNING
in the store, and `tuner ls` / `tuner show` show it INTERRUPTED once its heartbeat is stale."""

from __future__ import annotations

import signal
import time

import pytest

from tests.tuner.cli.conftest import cli
from tests.tuner.cli.test_sweep_store_faults import resume_finishes, start_held_sweep

pytestmark = pytest.mark.usefixtures("ray_session")

BEAT = "0.5"  # seconds between heartbeats here: a stale one is 4 beats old (2 s)


def _ls_status(storage, name) -> str:
    proc = cli("ls", "--storage-path", str(storage), TUNER_HEARTBEAT_S=BEAT)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    return next(row[1] for row in rows if row[0] == name)


def test_a_killed_driver_shows_interrupted_and_resumes(tmp_path, ray_address, monkeypatch):
    monkeypatch.setenv("TUNER_HEARTBEAT_S", BEAT)  # the sweep's driver beats this often
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "killed")
    storage = run_dir.parent
    assert _ls_status(storage, "killed") == "RUNNING"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    killed_at = time.monotonic()
    deadline = killed_at + 60
    while _ls_status(storage, "killed") != "INTERRUPTED":  # within 4 beats, however loaded the machine
        assert time.monotonic() < deadline, "still RUNNING a minute after its driver was killed"
    shown = cli("show", "killed", "--storage-path", str(storage), TUNER_HEARTBEAT_S=BEAT).stdout
    assert "INTERRUPTED (stored as RUNNING, but its driver's last heartbeat was" in shown, shown
    resume_finishes(run_dir, ray_address)
    assert _ls_status(storage, "killed") == "TERMINATED"
