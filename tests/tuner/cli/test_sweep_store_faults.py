"""`tuner sweep` when its store fails mid-sweep: one line, exit 1, and nothing a user may need
deleted (the spec, TensorBoard logs, the trials' checkpoints)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.tuner.cli.conftest import cli_popen, query_rows

pytestmark = pytest.mark.usefixtures("ray_session")

SPEC = """\
trainable: tests.tuner.cli.cli_trainables:checkpointed
metric: score
mode: max
resources: {cpu: 0.5}
max_concurrent_trials: 2
config:
  x: {grid_search: [1.0, 2.0]}
  iterations: 6
  sleep: 0.02
  hold_after: 2
"""


def start_held_sweep(tmp_path: Path, ray_address: str, name: str):
    """A `tuner sweep` whose two trials hold after 2 results each (checkpointed) until the
    returned release file exists; returns (process, run_dir, release) once they hold."""
    spec = tmp_path / "spec.yaml"
    release = tmp_path / "release"
    spec.write_text(SPEC + f"  release: {release}\n")
    storage = tmp_path / "results"
    run_dir = storage / name
    db = run_dir / "tuner.db"
    proc = cli_popen("sweep", str(spec), "--name", name, "--address", ray_address, "--progress", "none",
                     "--set", f"storage_path={storage}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db.exists() and query_rows(db, "SELECT COUNT(*) FROM results") == [(4,)]:
                break
        except Exception:  # noqa: BLE001 - the tables are being created
            pass
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended early: " + proc.communicate()[1]
    return proc, run_dir, release


def finish(proc, release: Path) -> tuple[str, str]:
    release.touch()
    try:
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_database_removed_mid_sweep_leaves_the_sweeps_files(tmp_path, ray_address):
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "gone")
    checkpoints = sorted(run_dir.glob("*/checkpoint_*"))
    assert len(checkpoints) == 4, checkpoints
    (run_dir / "tuner.db").unlink()
    out, err = finish(proc, release)
    assert proc.returncode == 1, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "was removed while in use" in lines[0] and "Traceback" not in err, err
    assert (run_dir / "sweep.yaml").is_file()
    assert any((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert all(path.is_dir() for path in checkpoints)
