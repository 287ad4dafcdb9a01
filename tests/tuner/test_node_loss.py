"""Losing the node that hosts a trial: the trial goes on elsewhere from its checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.cluster


def test_trial_survives_the_loss_of_its_node(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run(
        [sys.executable, "-m", "tests.tuner.node_loss_sweep", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["removed"], "the watcher never removed a node"
    assert report["status"] == "TERMINATED" and report["num_failures"] >= 1
    assert report["iterations"] == list(range(10))  # every iteration once, none lost
    nodes = report["nodes"]
    assert nodes[0] == report["removed"] and nodes[-1] != report["removed"]  # moved to the other node
    assert max(report["resumed_from"]) > 0  # and went on from a checkpoint, not from scratch
