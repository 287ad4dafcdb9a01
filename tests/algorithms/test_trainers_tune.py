"""Every trainer tunes: an ASHA sweep cuts trials by their returns and lets the best run its
budget; a synchronous PBT sweep exploits, its driver is killed, and the resumed sweep stores every
result exactly once, each exploited trial learning with its own (perturbed) config after the
restore. One contract, one row per trainer (each with its small task: tests/algorithms/trainer_rows.py)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from schedulers import ASHAScheduler
from tests.algorithms.trainer_rows import ROWS, pbt_sweep
from tests.conftest import ROOT
from tuner import tune


@pytest.mark.parametrize("name", sorted(ROWS))
def test_asha_cuts_trials_and_the_best_runs_its_budget(name, ray_session, tmp_path):
    # One trial at a time, seeded, sampling in the learner's process: the rungs see the same
    # returns in the same order every run, so whether a trial is cut does not depend on timing
    # (asynchronous ASHA cuts none when each trial reaches a rung better than all before it).
    row = ROWS[name]
    key, values = row.asha_grid
    analysis = tune.run(name, config={**row.config, "seed": 0, key: tune.grid_search(values)},
                        scheduler=ASHAScheduler(time_attr="env_steps_total", max_t=row.budget,
                                                grace_period=row.budget // 4, reduction_factor=2),
                        metric="episode_return_mean", mode="max", stop={"env_steps_total": row.budget},
                        max_concurrent_trials=1, storage_path=str(tmp_path), name="asha", verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    steps = sorted(t.last_result["env_steps_total"] for t in analysis.trials)
    assert steps[0] < row.budget <= steps[-1]  # some trials were cut, the best ran to the end


def _exploits(db: str) -> int:
    if not os.path.exists(db):
        return 0
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT COUNT(*) FROM exploits")).scalar_one()
    except sa.exc.OperationalError:  # the tables are not made yet
        return 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_pbt_sweep_killed_after_an_exploit_resumes_every_result_exactly_once(name, ray_session, tmp_path):
    """The row's PBT sweep in a driver process (it joins this session's Ray), held and SIGKILLed
    once its first exploit is on record; the sweep resumed here finishes both trials with each
    iteration's result stored once, the results from before the kill unchanged."""
    import ray

    row, storage = ROWS[name], str(tmp_path)
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    with open(tmp_path / "driver.stderr", "w") as err:  # a file: a full pipe would block the driver
        proc = subprocess.Popen([sys.executable, "-m", "tests.algorithms.trainer_rows", storage, name], cwd=ROOT,
                                env=env, stderr=err)
    db = os.path.join(storage, "pbt", "tuner.db")
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None and _exploits(db) < 1:
            time.sleep(0.05)
        assert proc.poll() is None and _exploits(db), "no exploit: " + (tmp_path / "driver.stderr").read_text()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
    before = tune.load(tmp_path / "pbt")
    rows_before = {(r["trial_id"], r["training_iteration"]): r["episode_return_mean"]
                   for r in before.results_df.to_dict("records")}
    before.close()

    analysis = pbt_sweep(name, storage, resume=True)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 2
    df = analysis.results_df
    assert not df.duplicated(["trial_id", "training_iteration"]).any()
    for trial_id, frame in analysis.trial_dataframes.items():
        assert list(frame["training_iteration"]) == list(range(1, row.pbt_iterations + 1)), trial_id
    after = {(r["trial_id"], r["training_iteration"]): r["episode_return_mean"] for r in df.to_dict("records")}
    assert all(after[key] == value or (math.isnan(value) and math.isnan(after[key]))  # NaN: no episode ended yet
               for key, value in rows_before.items())
    assert analysis.exploits, "no trial exploited another"
    for trial in analysis.trials:  # the restored trial learns with its own (perturbed) lr
        assert trial.last_result["cur_lr"] == pytest.approx(trial.config[row.lr_key])
