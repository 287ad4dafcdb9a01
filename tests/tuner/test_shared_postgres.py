"""Several sweeps, in several driver processes, on one PostgreSQL database at once."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
import ray

from tests.conftest import ROOT
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")

DRIVER = """
import sys, time
from tuner import tune
def train(config):
    for i in range(12):
        time.sleep(0.02)
        tune.report({"score": config["x"] * i})
tune.run(train, config={"x": tune.grid_search([1, 2, 3])}, metric="score", mode="max",
         resources_per_trial={"cpu": 0.25}, storage_path=sys.argv[1], database_url=sys.argv[2],
         name=sys.argv[3], verbose=0)
"""


def test_two_drivers_share_one_postgres_database(tmp_path, postgres_url):
    names = [f"shared_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # this session's Ray
    procs = [
        subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / n), postgres_url, n], cwd=ROOT, env=env)
        for n in names
    ]
    for proc in procs:
        assert proc.wait(timeout=180) == 0
    for name in names:
        analysis = tune.load(tmp_path / name / name, database_url=postgres_url)
        assert len(analysis.trials) == 3 and {t.status for t in analysis.trials} == {"TERMINATED"}
        frame = analysis.results_df
        assert len(frame) == 36 and not frame.duplicated(["trial_id", "training_iteration"]).any()
        assert analysis.best_config == {"x": 3}
        analysis.close()
