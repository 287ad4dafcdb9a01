"""The exit codes that are not about a bad spec: no verb, a Ray that does not answer, a port in use,
a sweep that another driver runs. Each is one line on stderr, never a traceback."""

from __future__ import annotations

import os
import re
import shutil
import socket
import time


from tests.tuner.cli.conftest import cli, query_rows
from tuner.cli import main
from tuner.cli.errors import EXIT_BUSY, EXIT_FAILED, EXIT_USAGE

SPEC = """\
trainable: tests.tuner.cli.cli_trainables:quadratic
metric: score
mode: max
config:
  x: {uniform: [0, 1]}
"""


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("tuner: error: "), stderr
    return lines[0]


def test_no_verb_prints_the_usage_and_exits_2(capsys):
    assert main([]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    usage, error = err.strip().splitlines()
    assert usage.startswith("usage: tuner")
    assert error.startswith("tuner: error: a verb is required, one of: sweep, resume, submit, validate, ls, show")


def test_an_unreachable_ray_address_fails_in_seconds_with_one_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    storage = tmp_path / "results"
    with socket.socket() as held:  # bound and never listening: a connection to it is refused
        held.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{held.getsockname()[1]}"
        began = time.monotonic()
        proc = cli("sweep", str(spec), "--name", "unreachable", "--address", address,
                   "--set", f"storage_path={storage}", timeout=120)
        took = time.monotonic() - began
    assert proc.returncode == EXIT_FAILED, proc.stderr
    line = _one_error_line(proc.stderr)
    assert line.startswith(f"tuner: error: cannot reach Ray at '{address}' (connection refused)"), line
    assert proc.stdout == ""
    assert not storage.exists() or not any(storage.iterdir())
    assert took < 60, took  # interpreter and imports on a loaded machine; ray.init alone retries for minutes


def test_tensorboard_on_a_port_in_use_says_so_and_exits_2(real_sweep):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = cli("tensorboard", "real", "--storage-path", str(real_sweep.storage), "--port", str(port),
                   timeout=120)
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert _one_error_line(proc.stderr) == (
        f"tuner: error: port {port} on 127.0.0.1 is in use; pick another with --port"
    )
    assert "http://" not in proc.stdout + proc.stderr


def test_a_second_driver_of_a_sweep_exits_3_and_changes_nothing(real_sweep, ray_address, tmp_path):
    from tuner.execution.sweep_lock import SweepLock
    from tuner.store import default_database_url

    copy = tmp_path / "real"
    shutil.copytree(real_sweep.run_dir, copy, ignore=shutil.ignore_patterns("*.lock"))
    db = copy / "tuner.db"
    query = "SELECT (SELECT status FROM experiments), (SELECT COUNT(*) FROM trials), (SELECT COUNT(*) FROM results)"
    before = query_rows(db, query)
    lock = SweepLock(default_database_url(copy), "real", copy).acquire()  # this test process is the other driver
    try:
        proc = cli("resume", str(copy), "--address", ray_address)
    finally:
        lock.release()
    assert proc.returncode == EXIT_BUSY, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr)
    assert "sweep 'real' in " in line and f"is already being run by another driver (pid {os.getpid()} on " in line, line
    assert query_rows(db, query) == before


def test_the_help_documents_every_exit_code():
    import tuner.cli

    for code in ("0 success", "1 trials failed", "2 bad spec", "3 another driver", "130 interrupted by SIGINT",
                 "143 terminated by SIGTERM"):
        assert code in tuner.cli.EPILOG, code
        assert re.search(rf"^ +{code.split()[0]} +\w", tuner.cli.__doc__, re.MULTILINE), code
