"""The elastic-ASHA benchmark runs its fixed sweep and the elastic replay of its decisions on a tiny
budget and prints its table (its figures are the benchmark's business, not this test's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "elastic_asha.py"


@pytest.mark.usefixtures("ray_session")
def test_elastic_asha_replays_the_fixed_sweeps_decisions_on_a_tiny_budget():
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray (2 CPUs)
    # Live ASHA under the elastic scheduler is the replay's path with another base scheduler.
    args = ["--modes", "fixed,replay", "--trials", "4", "--envs", "2", "--ray-cpus", "2", "--learner-cpus", "0.25",
            "--batch", "128", "--grace", "256", "--max-t", "640", "--fast-ms", "0.5", "--slow-prob", "0"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "4 PPO trials x 2 envs at start, 2 per rollout actor (env threads)" in out, out
    rows = {m.group(1): m for m in re.finditer(r"^\s*(fixed|replay)\s+([\d.]+)\s+([\d,]+)\s+(\d+)\s+([\d.]+)%.*; (\[.*\])$",
                                               out, re.M)}
    assert set(rows) == {"fixed", "replay"}, out
    assert all(int(m.group(3).replace(",", "")) >= 4 * 256 for m in rows.values()), out  # every trial reached the rung
    assert rows["fixed"].group(6) == rows["replay"].group(6), out
    assert "replay ends" in out and "the same trials promoted" in out, out


def test_elastic_asha_rejects_bad_flags():
    for args, message in ((["--trials", "6"], "--trials: a multiple of 4"),
                          (["--rf", "1"], "--rf: must be > 1, got 1.0"),
                          (["--max-t", "100"], "--max-t: must be above --grace (2048), got 100"),
                          (["--modes", "fixed,foo"], "--modes: a comma-separated list of ['fixed', 'elastic', 'replay']"),
                          (["--modes", "replay,fixed"], "--modes: replay repeats the fixed sweep's decisions"),
                          (["--env-threads", "3"], "--env-threads: must divide --envs (8), got 3"),
                          (["--repeat", "0"], "--repeat: must be >= 1, got 0"),
                          (["--ray-cpus", "4"], "--ray-cpus: 4 CPUs over 8 trials leave nothing")):
        proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr, proc.stderr
