"""While a sweep runs, every query answers from the results stored so far: `tuner show`, `tuner
best`, `tune.load(...)` and a ResultGrid see each trial's latest result, not its last status change."""

from __future__ import annotations

import time

import pytest

from tests.tuner.cli.conftest import cli, cli_popen, query_rows
from tuner import tune
from tuner.result_grid import ResultGrid

pytestmark = pytest.mark.usefixtures("ray_session")

HOLD = 3
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
"""


def test_queries_of_a_running_sweep_see_its_latest_results(tmp_path, ray_address):
    spec = tmp_path / "spec.yaml"
    release = tmp_path / "release"
    # both trials hold after their third result until `release` exists: the queries run then
    spec.write_text(SPEC + f"  hold_after: {HOLD}\n  release: {release}\n")
    storage = tmp_path / "results"
    run_dir = storage / "live"
    db = run_dir / "tuner.db"
    proc = cli_popen("sweep", str(spec), "--name", "live", "--address", ray_address, "--progress", "none",
                     "--set", f"storage_path={storage}")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                # every result stored, and each trial's newest one its last_result (which the store
                # writes within latest.INTERVAL_S of the result)
                if db.exists() and query_rows(db, "SELECT COUNT(*) FROM results") == [(2 * HOLD,)] and query_rows(
                        db, f"SELECT COUNT(*) FROM trials WHERE json_extract(last_result, '$.training_iteration') = {HOLD}"
                ) == [(2,)]:
                    break
            except Exception:  # noqa: BLE001 - the tables are being created
                pass
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended early: " + proc.communicate()[1]
        assert query_rows(db, "SELECT DISTINCT status FROM trials") == [("RUNNING",)]

        shown = cli("show", "live", "--storage-path", str(storage))
        assert shown.returncode == 0, shown.stdout + shown.stderr
        rows = [row for row in map(str.split, shown.stdout.splitlines()) if len(row) > 3 and row[1] == "RUNNING"]
        assert len(rows) == 2 and all(row[1:3] == ["RUNNING", str(HOLD)] for row in rows), shown.stdout
        best = cli("best", "live", "--storage-path", str(storage))
        assert best.returncode == 0, best.stdout + best.stderr
        assert "score=6" in best.stdout and f"at iteration {HOLD}" in best.stdout, best.stdout

        with tune.load(run_dir) as analysis:
            assert analysis.best_config["x"] == 2.0
            assert analysis.get_best_trial().last_result["training_iteration"] == HOLD
            grid = ResultGrid(analysis)
            assert grid.get_best_result().metrics["score"] == 2.0 * HOLD
    finally:
        release.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
