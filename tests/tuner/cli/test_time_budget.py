"""`tuner sweep` cut by its time_budget_s says how many trials did not run, and `tuner resume`
(as printed) runs them."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.tuner.cli.conftest import cli

pytestmark = pytest.mark.usefixtures("ray_session")

SPEC = """\
trainable: tests.tuner.cli.cli_trainables:checkpointed
metric: score
mode: max
search: grid
time_budget_s: 2
resources: {cpu: 0.5}
max_concurrent_trials: 1
config:
  x: {grid: [1, 2, 3, 4]}
  iterations: 2
  sleep: 0
  hold_after: 1
"""
LINE = re.compile(r"time budget of 2 s spent: (\d+) of 4 trials did not run; the sweep is stored as INCOMPLETE, "
                  r"`(tuner resume [^`]+)` runs the rest \(with a fresh time budget\)")


def test_a_budget_cut_sweep_says_what_did_not_run_and_resume_runs_it(tmp_path, ray_address):
    release = tmp_path / "release"
    spec = tmp_path / "spec.yaml"
    # No trial can end before `release` exists: the budget cuts the first run, whatever the load.
    spec.write_text(SPEC + f"  release: {release}\n")
    storage = tmp_path / "results"
    proc = cli("sweep", str(spec), "--name", "cut", "--address", ray_address, "--set", f"storage_path={storage}")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # cut by its budget, not failed
    found = LINE.search(proc.stdout)
    assert found, proc.stdout
    not_run, command = int(found.group(1)), found.group(2)
    assert not_run > 0
    assert command.endswith(f" --address {ray_address}"), command  # a resume joins the cluster it ran on
    shown = cli("show", "cut", "--storage-path", str(storage))  # which `show` does not know of
    assert "INCOMPLETE" in shown.stdout and found.group(0).replace(f" --address {ray_address}", "") in shown.stdout, \
        shown.stdout + shown.stderr

    release.touch()
    # Each resume has a fresh budget: on a loaded machine it may take several, some of which run
    # nothing (a trial actor's start alone can outlast 2 s); the rest never grows.
    stalled = 0
    while True:
        proc = cli(*shlex.split(command)[1:])  # as printed
        assert proc.returncode == 0, proc.stdout + proc.stderr
        found = LINE.search(proc.stdout)
        if found is None:
            break
        assert int(found.group(1)) <= not_run, proc.stdout
        stalled = stalled + 1 if int(found.group(1)) == not_run else 0
        assert stalled < 6, f"six resumes in a row ran nothing: {proc.stdout}"
        not_run = int(found.group(1))
    assert "sweep cut: 4 trials (4 TERMINATED)" in proc.stdout, proc.stdout
    shown = cli("show", "cut", "--storage-path", str(storage))
    assert "TERMINATED" in shown.stdout and "time budget" not in shown.stdout
