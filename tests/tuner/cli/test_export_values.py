"""`tuner export --format json` keeps what a trial reported apart from what it did not: an
infinity is the string "Infinity" (standard JSON has no token for it), a metric not reported is null."""

from __future__ import annotations

import json

import pytest

from tests.tuner.cli.cli_trainables import unbounded
from tests.tuner.cli.conftest import cli
from tuner import tune


@pytest.mark.usefixtures("ray_session")
def test_infinities_are_exported_apart_from_values_not_reported(tmp_path):
    tune.run(unbounded, storage_path=str(tmp_path), name="inf", resources_per_trial={"cpu": 0.5}, verbose=0).close()
    proc = cli("export", "inf", "--format", "json", "--storage-path", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["score"], r.get("late")) for r in rows] == [("Infinity", None), ("-Infinity", 1.0)], rows
