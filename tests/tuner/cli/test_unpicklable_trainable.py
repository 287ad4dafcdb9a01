"""`tuner sweep` of a trainable that cannot be pickled: one line naming what cannot be pickled,
exit 2, nothing left behind, and the corrected spec runs under the same name."""

from __future__ import annotations

import threading

import pytest

from tests.tuner.cli.conftest import cli
from tuner import tune


def _locked_trainable():
    guard = threading.Lock()

    def train(config):
        with guard:
            tune.report({"score": config["x"]})

    return train


#: what a spec names as `module:function`: a closure over a lock, so it is pickled by value
locked = _locked_trainable()

pytestmark = pytest.mark.usefixtures("ray_session")

SPEC = """\
trainable: tests.tuner.cli.test_unpicklable_trainable:{name}
metric: score
mode: max
resources: {{cpu: 0.5}}
config:
  x: 0.5
"""


def test_an_unpicklable_trainable_is_one_line_and_the_name_stays_free(tmp_path, ray_address):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(name="locked"))
    storage = tmp_path / "results"
    args = ("--name", "locked", "--address", ray_address, "--set", f"storage_path={storage}")
    proc = cli("sweep", str(spec), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "tuner: error: run_or_experiment: _locked_trainable.<locals>.train cannot be sent to Ray's workers: it "
        "uses guard, a _thread.lock, which cannot be pickled (cannot pickle '_thread.lock' object); create such "
        "objects inside the trainable instead")
    assert "Traceback" not in proc.stderr
    assert not (storage / "locked").exists()
    spec.write_text(SPEC.format(name="fixed"))
    proc = cli("sweep", str(spec), *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sweep locked: 1 trials (1 TERMINATED)" in proc.stdout


def fixed(config):
    tune.report({"score": config["x"]})
