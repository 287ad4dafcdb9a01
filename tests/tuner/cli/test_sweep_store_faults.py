"""`tuner sweep` when its store fails mid-sweep: one line, exit 1, and nothing a user may need
deleted (the spec, TensorBoard logs, the trials' checkpoints)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.tuner.cli.conftest import cli, cli_popen, query_rows

pytestmark = pytest.mark.usefixtures("ray_session")

SPEC = """\
trainable: {trainable}
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


def held(config):
    """``iterations`` results, no checkpoint; waits after ``hold_after`` of them until ``release``
    exists (a trainable that writes nothing to disk itself)."""
    from tuner import tune

    for i in range(1, config["iterations"] + 1):
        if i == config["hold_after"] + 1:
            deadline = time.monotonic() + 120
            while not os.path.exists(config["release"]) and time.monotonic() < deadline:
                time.sleep(0.02)
        tune.report({"score": config["x"] * i})


def start_held_sweep(tmp_path: Path, ray_address: str, name: str, storage: Path | None = None,
                     database_url: str | None = None, trainable: str = "tests.tuner.cli.cli_trainables:checkpointed",
                     extra_flags: tuple[str, ...] = ()):
    """A `tuner sweep` whose two trials hold after 2 results each (checkpointed) until the
    returned release file exists; returns (process, run_dir, release) once they hold."""
    spec = tmp_path / "spec.yaml"
    release = tmp_path / "release"
    spec.write_text(SPEC.replace("{trainable}", trainable) + f"  release: {release}\n")
    storage = storage or tmp_path / "results"
    run_dir = storage / name
    db = run_dir / "tuner.db"
    extra = ["--database-url", database_url] if database_url else []
    proc = cli_popen("sweep", str(spec), "--name", name, "--address", ray_address, "--progress", "none",
                     "--set", f"storage_path={storage}", *extra, *extra_flags)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if _stored_results(database_url or f"sqlite:///{db}") == 4:  # both trials hold
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended early: " + proc.communicate()[1]
    return proc, run_dir, release


def _stored_results(url: str) -> int:
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return 0  # not created yet (a connection would create it)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar() or 0)
    except sa.exc.DBAPIError:  # the tables are being created
        return 0
    finally:
        engine.dispose()


def resume_finishes(run_dir: Path, ray_address: str, *extra: str) -> None:
    """`tuner resume` of the sweep cut short finishes its trials from their checkpoints."""
    (run_dir.parent.parent / "release").touch()
    proc = cli("resume", run_dir.name, "--storage-path", str(run_dir.parent), "--address", ray_address,
               "--progress", "none", *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"sweep {run_dir.name}: 2 trials (2 TERMINATED)" in proc.stdout, proc.stdout


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


def _can_make_immutable(tmp_path: Path) -> str | None:
    """Why a test cannot make a file immutable here (None: it can)."""
    probe = tmp_path / "immutable_probe"
    probe.touch()
    try:
        done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, text=True)
    except FileNotFoundError:
        return "chattr is not installed"
    if done.returncode != 0:
        return f"chattr +i is refused here: {done.stderr.strip()}"
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    return None


def _one_line(err: str, *, allowed_before: tuple[str, ...] = ()) -> str:
    """The driver's one error line, past the lines other parts may say first (Ray's own warning
    at start, a TensorBoard export that stopped)."""
    lines = [line for line in err.strip().splitlines()
             if "Token authentication" not in line and not line.startswith(allowed_before)]
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert len(lines) == 1 and lines[0].startswith("tuner: error: tuner store "), err
    return lines[0]


def test_an_immutable_database_ends_the_sweep_with_one_line_and_resume_finishes_it(tmp_path, ray_address):
    """chattr +i on the database, its WAL and shared-memory file: SQLite writes into the mapped
    shared-memory file, where a protected page is SIGBUS, not an error."""
    why = _can_make_immutable(tmp_path)
    if why:
        pytest.skip(why)
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "frozen")
    files = [str(run_dir / name) for name in ("tuner.db", "tuner.db-wal", "tuner.db-shm")]
    subprocess.run(["chattr", "+i", *files], check=True)
    # Written back, the mapped pages of the shared-memory file fault on their next write, as they
    # do once the kernel writes them back by itself: a write then is SIGBUS, not an error.
    os.sync()
    try:
        out, err = finish(proc, release)
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)
    assert proc.returncode == 1, out + err
    print("ERR", err)
    line = _one_line(err)
    assert f"cannot write {run_dir / 'tuner.db'}" in line and "immutable" in line, line
    printed = line.split("`")[1]  # run as printed: it names the cluster the sweep ran on
    assert printed == f"tuner resume frozen --storage-path {run_dir.parent} --address {ray_address}", printed
    (run_dir.parent.parent / "release").touch()
    proc = cli(*shlex.split(printed)[1:], "--progress", "none")
    assert proc.returncode == 0 and "sweep frozen: 2 trials (2 TERMINATED)" in proc.stdout, proc.stdout + proc.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB tmpfs of this test's own (as root), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_ends_the_sweep_with_one_line_and_resume_finishes_it(tmp_path, ray_address, small_disk):
    # trials that write nothing themselves: a checkpoint on a full disk fails its trial (as it should)
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "full", storage=small_disk / "results",
                                              trainable="tests.tuner.cli.test_sweep_store_faults:held")
    filler = _fill(small_disk)
    out, err = finish(proc, release)
    assert proc.returncode == 1, out + err
    line = _one_line(err)  # the store's line alone: the TensorBoard export's full disk is the same cause
    assert "database or disk is full" in line and "tuner resume full" in line, line
    filler.unlink()
    resume_finishes(run_dir, ray_address)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:  # every byte left (unbuffered: closing has nothing to write)
        try:
            while f.write(b"\0" * (1 << 16)):
                pass
        except OSError:
            pass
    return filler


def test_checkpoints_on_a_full_disk_stop_the_sweep_with_one_line_and_no_trial_failed(tmp_path, ray_address,
                                                                                     small_disk):
    """Trials whose checkpoints find no space have not failed: the sweep stops with one line, the
    cause first, its trials INTERRUPTED (as the live display says), and a resume finishes them."""
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "cramped", storage=small_disk / "results")
    filler = _fill(small_disk)
    out, err = finish(proc, release)
    assert proc.returncode == 1, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("tuner: error: no space left for the files of trial checkpointed_"), lines[0]
    assert "[Errno 28] No space left on device" in lines[0] and "`tuner resume cramped" in lines[0], lines[0]
    filler.unlink()
    # INTERRUPTED, or RUNNING where the store found no space to say so (a stale heartbeat shows it INTERRUPTED)
    statuses = query_rows(run_dir / "tuner.db", "SELECT status, num_failures, error FROM trials")
    assert all(status in ("INTERRUPTED", "RUNNING") and not failures and error is None
               for status, failures, error in statuses) and len(statuses) == 2, statuses
    resume_finishes(run_dir, ray_address)


def test_a_postgres_store_gone_mid_sweep_ends_it_with_one_line_and_resume_finishes_it(
    tmp_path, ray_address, own_postgres_database,
):
    name, url, admin = own_postgres_database
    proc, run_dir, release = start_held_sweep(tmp_path, ray_address, "pg", database_url=url)
    with admin.connect() as conn:  # the server refuses the sweep's connections from now on
        conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
        conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"), {"n": name})
    out, err = finish(proc, release)
    assert proc.returncode == 1, out + err
    print("ERR", err)
    line = _one_line(err)
    assert "cannot write to it" in line and "tuner resume pg" in line, line
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
    resume_finishes(run_dir, ray_address, "--database-url", url)
