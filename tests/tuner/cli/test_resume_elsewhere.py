"""`tuner resume NAME` by a second user, of a sweep that runs elsewhere on a shared store (or in a
shared run directory), or that was started on another machine: one line saying where."""

from __future__ import annotations

import shlex
import shutil
import socket
import time

import pytest
import sqlalchemy as sa

from tests.tuner.cli.conftest import cli, cli_popen

pytestmark = pytest.mark.usefixtures("ray_session")

SPEC = """\
trainable: tests.tuner.cli.cli_trainables:checkpointed
metric: score
mode: max
num_samples: 1
resources: {cpu: 0.5}
config:
  x: 1.0
  iterations: 2
  sleep: 0.05
  hold_after: 1
"""


def _results(url: str, name: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                "SELECT COUNT(*) FROM results r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = :n"
            ), {"n": name}).scalar() or 0
    except sa.exc.DBAPIError:  # not created yet
        return 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_resume_of_a_sweep_running_elsewhere_names_its_driver_and_one_started_elsewhere_says_where(
        backend, tmp_path, ray_address, request):
    name = f"shared_{backend}"
    release = tmp_path / "release"
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + f"  release: {release}\n")
    first, second = tmp_path / "first", tmp_path / "second"  # the storage paths of two users
    flags = ["--database-url", request.getfixturevalue("postgres_url")] if backend == "postgresql" else []
    url = flags[1] if flags else f"sqlite:///{first / name / 'tuner.db'}"
    driver_name = "tuner driver " if flags else ""  # PostgreSQL: the name its session gave itself
    where = _masked(url) if flags else str(first / name / "tuner.db")
    driver = cli_popen("sweep", str(spec), "--name", name, "--address", ray_address, "--storage-path", str(first),
                       *flags)
    try:
        deadline = time.monotonic() + 120
        while driver.poll() is None and time.monotonic() < deadline and _results(url, name) < 1:
            time.sleep(0.05)
        assert driver.poll() is None, driver.communicate()
        # the same run directory, and (on the shared database) another user's storage path
        for storage in [first, second] if flags else [first]:
            proc = cli("resume", name, "--storage-path", str(storage), *flags)
            assert proc.returncode == 3, proc.stdout + proc.stderr
            assert proc.stderr == (f"tuner: error: sweep {name!r} in {where} is already being run by "
                                   f"another driver ({driver_name}pid {driver.pid} on {socket.gethostname()}); "
                                   f"wait for it to end, or stop it first\n")
        assert not second.exists()  # the check wrote nothing
    finally:
        release.touch()
        out, err = driver.communicate(timeout=120)
    assert driver.returncode == 0, out + err
    if not flags:
        return
    # Ended, and its spec not kept in the store (a sweep started from Python, or by an older tuner):
    # the second user has no run directory, hence no sweep.yaml; the sweep's is in `first`.
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM experiment_state WHERE key = 'cli_spec'"))
    engine.dispose()
    proc = cli("resume", name, "--storage-path", str(second), *flags)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"tuner: error: sweep {name!r} in {_masked(url)} was started in {first / name}, which "
                           f"holds its sweep.yaml and checkpoints: resume it with "
                           f"`tuner resume {name} --storage-path {first} --database-url {shlex.quote(url)}`\n")
    # The run directory on another machine (here: moved away): where to resume it, all the same.
    shutil.move(first, tmp_path / "away")
    for storage in [second, first]:
        proc = cli("resume", name, "--storage-path", str(storage), *flags)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (f"tuner: error: sweep {name!r} in {_masked(url)} keeps no spec in its store, and the "
                               f"run directory it was started in, {first / name} (its sweep.yaml and checkpoints), "
                               f"is not on this machine: resume it on the machine that has it, with "
                               f"`tuner resume {name} --storage-path {first} --database-url {shlex.quote(url)}`\n")
    assert not second.exists() and not first.exists()


def _masked(url: str) -> str:
    from tuner.store import mask_url

    return mask_url(url)
