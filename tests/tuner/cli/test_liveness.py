"""A sweep's status never lies: a driver killed without a word (SIGKILL) leaves its sweep RUNNING
in the store, and `tuner ls` / `tuner show` show it INTERRUPTED once its heartbeat is stale."""

from __future__ import annotations

import signal
import time

import pytest

from tests.tuner.cli.conftest import cli
from tests.tuner.cli.test_sweep_store_faults import finish, resume_finishes, start_held_sweep

pytestmark = pytest.mark.usefixtures("ray_session")

BEAT = "0.5"  # seconds between heartbeats here: a stale one is 4 beats old (2 s)


def _ls_row(storage, name) -> list[str]:
    proc = cli("ls", "--storage-path", str(storage), TUNER_HEARTBEAT_S=BEAT)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    return next(row for row in rows if row[0] == name)


def _ls_status(storage, name) -> str:
    return _ls_row(storage, name)[1]


def test_ls_counts_the_trials_a_sweep_plans_not_only_those_started(tmp_path, ray_address):
    """Two trials hold of the 8 planned (a grid of 2 x num_samples 4, two at a time)."""
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "planned", extra_flags=("--set", "num_samples=4"))
    assert _ls_row(run_dir.parent, "planned")[4:7] == ["0/8", "(2", "RUNNING)"]
    out, err = finish(proc, release)
    assert proc.returncode == 0, out + err
    assert _ls_row(run_dir.parent, "planned")[4:7] == ["8/8", "(8", "TERMINATED)"]


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


def test_a_second_sweep_of_a_running_sqlite_sweep_names_its_driver(tmp_path, ray_address):
    import socket

    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "twice")
    again = cli("sweep", str(tmp_path / "spec.yaml"), "--name", "twice", "--storage-path", str(run_dir.parent),
                "--address", ray_address)
    out, err = finish(proc, release)
    assert proc.returncode == 0, out + err
    assert again.returncode == 3, again.stdout + again.stderr
    assert again.stderr == (f"tuner: error: sweep 'twice' in {run_dir / 'tuner.db'} is already being run by another "
                            f"driver (pid {proc.pid} on {socket.gethostname()}); wait for it to end, or stop it "
                            f"first\n"), again.stderr
