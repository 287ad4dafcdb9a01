"""Ctrl-C (SIGINT) or SIGTERM during `tuner sweep` leaves a sweep that `tuner resume` finishes."""

from __future__ import annotations

import signal
import time

import pytest
import sqlalchemy as sa

from tests.tuner.cli.conftest import cli, cli_popen

pytestmark = pytest.mark.usefixtures("ray_session")

ITERATIONS = 8
HOLD = 3
SPEC = f"""\
trainable: tests.tuner.cli.cli_trainables:checkpointed
metric: score
mode: max
num_samples: 4
seed: 0
resources: {{cpu: 0.5}}
max_concurrent_trials: 2
config:
  x: {{uniform: [0, 1]}}
  iterations: {ITERATIONS}
  sleep: 0.25
"""


def _query(db, sql):
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).all()
    except sa.exc.OperationalError:  # not created yet
        return []
    finally:
        engine.dispose()


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_a_signal_leaves_a_sweep_that_resume_finishes(tmp_path, ray_address, sig, code, said):
    spec = tmp_path / "spec.yaml"
    release = tmp_path / "release"
    # every trial holds after its third step until `release` exists: the signal comes while the
    # first two trials are running, each with 3 results and a checkpoint, however loaded the machine
    spec.write_text(SPEC + f"  hold_after: {HOLD}\n  release: {release}\n")
    storage = tmp_path / "results"
    db = storage / "intr" / "tuner.db"
    proc = cli_popen("sweep", str(spec), "--name", "intr", "--address", ray_address, "--set",
                     f"storage_path={storage}")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and _query(db, "SELECT COUNT(*) FROM results")[:1] >= [(2 * HOLD,)]:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted: " + proc.communicate()[1]
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, out + err
    assert "Traceback" not in err
    assert f"tuner: {said}; sweep 'intr' is saved and resumable: tuner resume intr --storage-path {storage}" in err

    assert _query(db, "SELECT status FROM experiments") == [("INTERRUPTED",)]
    # the trials the signal cut short are on record as INTERRUPTED: resumed from their checkpoint
    last = dict(_query(db, "SELECT trial_id, MAX(iteration) FROM results GROUP BY trial_id"))
    statuses = dict(_query(db, "SELECT trial_id, status FROM trials"))
    assert "INTERRUPTED" in statuses.values(), statuses
    assert all(last.get(t) == ITERATIONS for t, status in statuses.items() if status == "TERMINATED")

    release.touch()
    proc = cli("resume", "intr", "--storage-path", str(storage), "--address", ray_address)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sweep intr (score, max): resumed" in proc.stdout
    assert "sweep intr: 4 trials (4 TERMINATED)" in proc.stdout
    assert _query(db, "SELECT status FROM experiments") == [("TERMINATED",)]
    per_trial = _query(db, "SELECT trial_id, COUNT(*), MIN(iteration), MAX(iteration) FROM results GROUP BY trial_id")
    assert len(per_trial) == 4
    assert all(row[1:] == (ITERATIONS, 1, ITERATIONS) for row in per_trial), per_trial



def test_ctrl_c_pressed_three_times_still_ends_with_one_line_and_exit_130(tmp_path, ray_address):
    """The second Ctrl-C comes while the sweep is being saved, the third once the CLI has said its
    line (Ray shuts down at exit): neither cuts anything short or prints a traceback."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + f"  hold_after: 1\n  release: {tmp_path / 'never'}\n")
    storage = tmp_path / "results"
    db = storage / "ctrlc" / "tuner.db"
    proc = cli_popen("sweep", str(spec), "--name", "ctrlc", "--address", ray_address, "--set",
                     f"storage_path={storage}")
    said: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and _query(db, "SELECT COUNT(*) FROM results")[:1] < [(2,)]:
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted: " + proc.communicate()[1]
        proc.send_signal(signal.SIGINT)
        while time.monotonic() < deadline and proc.poll() is None and _query(db, "SELECT status FROM experiments") != [
                ("INTERRUPTED",)]:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # the controller has saved the sweep; the CLI is ending it
        for line in proc.stderr:
            said.append(line)
            if line.startswith("tuner: "):
                break
        proc.send_signal(signal.SIGINT)  # the CLI has said its line: Ray's shutdown at exit
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(said) + err
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.strip().splitlines()[-1] == (f"tuner: interrupted; sweep 'ctrlc' is saved and resumable: "
                                            f"tuner resume ctrlc --storage-path {storage} --address {ray_address}")
    assert _query(db, "SELECT status FROM experiments") == [("INTERRUPTED",)]
    assert set(dict(_query(db, "SELECT trial_id, status FROM trials")).values()) <= {"INTERRUPTED", "PENDING"}
