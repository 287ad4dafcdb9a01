"""The query verbs on a store that holds NaN metrics, that is corrupt, or an --output that cannot be
written: one line each, never a traceback."""

from __future__ import annotations

import json
import os

import pytest

from tests.tuner.cli.conftest import cli
from tests.tuner.stored_sweep import store_sweep

NAN, INF = float("nan"), float("inf")


def _one_error_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_best_and_show_name_the_trials_whose_nan_or_inf_was_left_out(tmp_path):
    store_sweep(tmp_path / "mixed", {"a": 1.0, "b": NAN, "c": INF, "d": 2.0})
    note = "2 trial(s) left out of the best 'score': b (NaN), c (inf) reported NaN or infinity"
    best = cli("best", "mixed", "--storage-path", str(tmp_path))
    assert best.returncode == 0 and "best trial: d" in best.stdout
    assert best.stderr.strip().startswith(f"tuner: note: {note}"), best.stderr
    as_json = cli("best", "mixed", "--json", "--storage-path", str(tmp_path))
    assert json.loads(as_json.stdout)["skipped"] == {"b": "nan", "c": "inf"}
    show = cli("show", "mixed", "--storage-path", str(tmp_path))
    assert show.returncode == 0 and "best: d score=2" in show.stdout
    assert f"note: {note}" in show.stdout


def test_best_and_show_say_so_when_every_metric_is_nan(tmp_path):
    store_sweep(tmp_path / "nans", {"a": NAN, "b": NAN})
    said = "no trial has a finite 'score' to rank: a (NaN), b (NaN) reported NaN or infinity"
    best = cli("best", "nans", "--storage-path", str(tmp_path))
    assert best.returncode == 1 and best.stderr.startswith(f"tuner: sweep 'nans': {said}"), best.stderr
    show = cli("show", "nans", "--storage-path", str(tmp_path))
    assert show.returncode == 0 and f"best: {said}" in show.stdout


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bad pages"])
def test_verbs_on_a_corrupt_database_print_one_line(tmp_path, damage):
    run_dir = tmp_path / "broken"
    store_sweep(run_dir, {f"t{i}": float(i) for i in range(60)})
    db = run_dir / "tuner.db"
    size = db.stat().st_size
    with db.open("r+b") as f:
        if damage == "garbage":
            f.write(os.urandom(size))
        elif damage == "truncated":
            f.truncate(size // 2)
        else:  # past the schema on the first pages: found only when results are read
            f.seek(size // 2)
            f.write(os.urandom(size // 2))
    verbs = [["best", "broken"], ["show", "broken"], ["export", "broken", "--format", "csv"],
             ["ls", "--database-url", f"sqlite:///{db}"]]
    for verb in verbs:
        proc = cli(*verb, "--storage-path", str(tmp_path))
        line = _one_error_line(proc)
        assert proc.returncode == 1, (verb, proc.returncode, line)
        assert f"{db} is not a tuner database, or it is corrupt (" in line, (verb, line)


def test_export_into_a_missing_folder_exits_2_and_writes_nothing(tmp_path):
    store_sweep(tmp_path / "fine", {"a": 1.0})
    target = tmp_path / "no_such_folder" / "out.csv"
    proc = cli("export", "fine", "--format", "csv", "-o", str(target), "--storage-path", str(tmp_path))
    assert proc.returncode == 2 and "--output" in _one_error_line(proc) and "does not exist" in proc.stderr
    assert not target.parent.exists()
    written = tmp_path / "out.json"
    proc = cli("export", "fine", "--format", "json", "-o", str(written), "--storage-path", str(tmp_path))
    assert proc.returncode == 0 and len(json.loads(written.read_text())) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fine", "out.json"]  # no temporary file left
