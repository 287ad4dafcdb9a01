"""`tuner sweep`'s summary says how many trials reported no result, and names them."""

from __future__ import annotations

import re

import pytest

from tests.tuner.cli.conftest import cli

pytestmark = pytest.mark.usefixtures("ray_session")

SPEC = """\
trainable: tests.tuner.cli.cli_trainables:quadratic
metric: score
mode: max
search: grid
resources: {cpu: 0.5}
config:
  x: {grid: [0.1, 0.2]}
  iterations: {grid: [0, 2]}
"""


def test_the_summary_says_which_trials_reported_no_result(tmp_path, ray_address):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)  # iterations 0: quadratic returns before its first report
    proc = cli("sweep", str(spec), "--name", "quiet", "--address", ray_address, "--set",
               f"storage_path={tmp_path / 'results'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sweep quiet: 4 trials (4 TERMINATED)" in proc.stdout
    found = re.search(r"^2 trial\(s\) reported no result: (\S+), (\S+) \(a function trainable must call "
                      r"tune.report\)$", proc.stdout, re.MULTILINE)
    assert found, proc.stdout
