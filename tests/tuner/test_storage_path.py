"""A storage_path of a scheme no filesystem here opens is one line naming storage_path at every
entry point, never a local folder named after its scheme; nothing is written. (Object stores that
do open are tested against a real S3 server in tests/tuner/storage.)"""

from __future__ import annotations

import os
import re

import pytest

from tests.tuner.cli.conftest import cli
from tuner import tune
from tuner.tune_config import ConfigError

URIS = ["nosuchscheme://bucket/sweeps", "foo+bar://host/x"]


def _train(config):
    tune.report({"score": 1.0})


@pytest.mark.parametrize("uri", URIS)
def test_tune_run_and_run_config_refuse_a_uri_no_filesystem_opens(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=rf"^storage_path: '{re.escape(uri)}' is a [\w+]+:// URI, which no filesystem here opens"):
        tune.run(_train, storage_path=uri, verbose=0)
    with pytest.raises(ConfigError, match=r"^RunConfig.storage_path: .* URI, which no filesystem here opens"):
        tune.RunConfig(storage_path=uri)
    assert os.listdir(tmp_path) == []


def test_a_spec_with_such_a_storage_path_is_one_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("trainable: PPO\nconfig: {env: CartPole-v1}\n")
    proc = cli("sweep", str(spec), "--set", "storage_path=nosuchscheme://bucket/sweeps")
    assert proc.returncode == 2 and proc.stderr.startswith(
        "tuner: error: spec key 'storage_path': 'nosuchscheme://bucket/sweeps' is a nosuchscheme:// URI, which no "
        "filesystem here opens; expected a folder, s3://BUCKET/PREFIX"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
