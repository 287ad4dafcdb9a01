"""Every verb as a subprocess against one real sweep (see conftest.real_sweep)."""

from __future__ import annotations

import csv
import io
import json
import getpass
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import ROOT
from tests.tuner.cli.conftest import cli, cli_env, query_rows

pytestmark = pytest.mark.usefixtures("ray_session")


def test_sweep_runs_and_exits_1_when_a_trial_failed(real_sweep):
    proc = real_sweep.proc
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # plain lines, since stdout is not a terminal: trial starts and ends, a final status line, the best
    assert "sweep real (score, max): started" in proc.stdout
    assert "RUNNING x=" in proc.stdout and "TERMINATED after" in proc.stdout and "ERROR after" in proc.stdout
    assert "best score=" in proc.stdout and "results/s" in proc.stdout
    assert "tuner: 1 trial(s) failed" in proc.stderr
    statuses = dict(query_rows(real_sweep.run_dir / "tuner.db", "SELECT status, COUNT(*) FROM trials GROUP BY status"))
    assert statuses == {"ERROR": 1, "TERMINATED": 5}
    assert (real_sweep.run_dir / "sweep.yaml").exists()


def test_commands_the_sweep_printed_work_as_printed_and_the_name_alone_finds_it(real_sweep):
    """The spec named its own storage path: the printed `tuner show` carries it, and the name alone
    finds the sweep too (the index of sweep locations under the default storage path)."""
    line = next(x for x in real_sweep.proc.stdout.splitlines() if x.startswith("stored in "))
    printed = line.split("`")[1]
    assert printed == f"tuner show real --storage-path {real_sweep.storage}"
    for args in (printed.split()[1:], ["show", "real"], ["best", "real"]):
        proc = cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "real" in proc.stdout or "score" in proc.stdout
    shown = json.loads(cli("best", "real", "--json").stdout)
    assert shown == json.loads(cli("best", str(real_sweep.run_dir), "--json").stdout)


def test_sweep_takes_storage_path_and_a_taken_name_names_its_location(real_sweep):
    proc = cli("sweep", str(real_sweep.spec), "--name", "real", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"a sweep named 'real' already exists in {real_sweep.storage}" in proc.stderr
    assert f"`tuner resume real --storage-path {real_sweep.storage}` continues it" in proc.stderr


def test_ls_lists_the_sweep_with_its_trial_counts(real_sweep):
    proc = cli("ls", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 0, proc.stderr
    header, line = proc.stdout.strip().splitlines()
    assert header.split() == ["NAME", "STATUS", "OWNER", "JOB", "TRIALS", "BEST", "CREATED"]
    assert line.startswith("real ") and "TERMINATED" in line and "6/6 (1 ERROR, 5 TERMINATED)" in line
    assert line.split()[2] == f"{getpass.getuser()}@{socket.gethostname()}" and line.split()[3] == "-"
    assert "score=" in line
    # the storage path can also come from the environment
    assert "real" in cli("ls", TUNER_STORAGE_PATH=str(real_sweep.storage)).stdout


def test_show_prints_trials_status_errors_and_best(real_sweep):
    proc = cli("show", "real", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "status       TERMINATED" in out and "metric       score (max)" in out
    assert "trials       6: 1 ERROR, 5 TERMINATED" in out
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split()[:4] == ["TRIAL", "STATUS", "ITER", "score"] and "x" in table[0].split()
    assert len(table) == 7
    assert sum("this trial was told to fail" in row for row in table) == 1
    assert "best: " in out and '"x": ' in out
    # by path, too
    by_path = cli("show", str(real_sweep.run_dir))
    assert by_path.returncode == 0 and by_path.stdout == out


def test_show_profile_prints_where_the_time_went_and_each_trials_split(real_sweep):
    proc = cli("show", "real", "--profile", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("where the wall time went: ")
    for part in ("engine start: Ray", "trial start", "rollout actors' start", "sampling", "learning", "other training",
                 "trial stop",
                 "waiting on the controller", "idle CPU", "total"):
        assert f"\n{part} " in out, part
    share = float(out.split("parts add up to ")[1].split("%")[0])
    assert 90.0 <= share <= 110.0, out
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split() == ["TRIAL", "CPUS", "HELD", "S", "START", "ROLLOUT", "START", "SAMPLING", "LEARNING",
                                "OTHER", "STOP", "WAITING"]
    stored = query_rows(real_sweep.run_dir / "tuner.db", "SELECT trial_id, hold_s FROM trial_profiles")
    assert len(table) - 1 == len(stored) == 6 and all(hold > 0 for _, hold in stored)


def test_best_text_and_json_agree_with_the_store(real_sweep):
    proc = cli("best", "real", "--json", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)
    rows = query_rows(real_sweep.run_dir / "tuner.db", "SELECT trial_id, metric_value FROM trials WHERE status='TERMINATED'")
    top = max(rows, key=lambda r: r[1])
    assert best["trial_id"] == top[0] and best["value"] == pytest.approx(top[1])
    assert best["metric"] == "score" and best["mode"] == "max" and set(best["config"]) >= {"x", "fail"}
    text = cli("best", "real", "--storage-path", str(real_sweep.storage))
    assert text.returncode == 0
    assert text.stdout.startswith(f"best trial: {top[0]} (TERMINATED), score=")
    assert f"  x: {best['config']['x']}" in text.stdout


def test_export_csv_and_json_hold_every_result(real_sweep):
    n_results = query_rows(real_sweep.run_dir / "tuner.db", "SELECT COUNT(*) FROM results")[0][0]
    proc = cli("export", "real", "--format", "csv", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == n_results > 0
    assert {"trial_id", "training_iteration", "score", "config/x"} <= set(rows[0])
    proc = cli("export", "real", "--format", "json", "--what", "trials", "--storage-path", str(real_sweep.storage))
    assert proc.returncode == 0, proc.stderr
    trials = json.loads(proc.stdout)
    assert len(trials) == 6 and {t["status"] for t in trials} == {"ERROR", "TERMINATED"}


def test_resume_of_a_finished_sweep_runs_nothing_again(real_sweep, ray_address):
    db = real_sweep.run_dir / "tuner.db"
    before = query_rows(db, "SELECT COUNT(*) FROM results")[0][0]
    proc = cli("resume", "real", "--storage-path", str(real_sweep.storage), "--address", ray_address)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # its failed trial is still failed
    assert "sweep real (score, max): resumed" in proc.stdout
    assert query_rows(db, "SELECT COUNT(*) FROM results")[0][0] == before


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensorboard_serves_the_sweep_and_rebuilds_a_missing_logdir(real_sweep, tmp_path):
    import shutil

    run_dir = tmp_path / "copy"
    shutil.copytree(real_sweep.run_dir, run_dir / "real")  # a copy whose logdir we delete
    shutil.rmtree(run_dir / "real" / "tensorboard")
    port = _free_port()
    log = open(tmp_path / "tb.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "tensorboard", str(run_dir / "real"), "--port", str(port)],
        cwd=ROOT, env=cli_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        runs = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "tb.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5) as response:
                    runs = json.loads(response.read())
                if len([r for r in runs if r != "."]) == 6:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        assert runs is not None and len([r for r in runs if r != "."]) == 6, (tmp_path / "tb.log").read_text()
        text = (tmp_path / "tb.log").read_text()
        assert "rebuilding the TensorBoard logdir" in text and f"http://127.0.0.1:{port}/" in text
        assert (run_dir / "real" / "tensorboard").is_dir()
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_resume_errored_only_retries_the_failed_trial(real_sweep, ray_address, tmp_path):
    import shutil

    copy = tmp_path / "real"
    shutil.copytree(real_sweep.run_dir, copy, ignore=shutil.ignore_patterns(".driver.lock"))
    before = dict(query_rows(copy / "tuner.db", "SELECT trial_id, num_failures FROM trials WHERE status = 'ERROR'"))
    proc = cli("resume", str(copy), "--errored-only", "--address", ray_address)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # it fails again, on purpose
    assert "ERROR after" in proc.stdout and "tuner: 1 trial(s) failed" in proc.stderr
    after = dict(query_rows(copy / "tuner.db", "SELECT trial_id, num_failures FROM trials WHERE status = 'ERROR'"))
    assert list(after) == list(before) and all(after[t] >= 1 for t in after)
    assert query_rows(real_sweep.run_dir / "tuner.db", "SELECT COUNT(*) FROM trials")[0][0] == 6  # the original untouched
