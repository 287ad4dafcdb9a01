"""A storage_path that is a URI (object storage) is one line naming storage_path at every entry
point, never a local folder named after its scheme; nothing is written."""

from __future__ import annotations

import os

import pytest

from tests.tuner.cli.conftest import cli
from tuner import tune
from tuner.tune_config import ConfigError

URIS = ["s3://bucket/sweeps", "gs://bucket/x", "hdfs://namenode:8020/x", "file:///tmp/x"]


def _train(config):
    tune.report({"score": 1.0})


@pytest.mark.parametrize("uri", URIS)
def test_tune_run_and_run_config_refuse_a_uri(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=rf"^storage_path: '{uri}' is a \w+:// URI, but object storage"):
        tune.run(_train, storage_path=uri, verbose=0)
    with pytest.raises(ConfigError, match=r"^RunConfig.storage_path: .* URI, but object storage"):
        tune.RunConfig(storage_path=uri)
    assert os.listdir(tmp_path) == []


def test_a_spec_with_a_uri_storage_path_is_one_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("trainable: PPO\nconfig: {env: CartPole-v1}\n")
    proc = cli("sweep", str(spec), "--set", "storage_path=s3://bucket/sweeps")
    assert proc.returncode == 2 and proc.stderr == (
        "tuner: error: spec key 'storage_path': 's3://bucket/sweeps' is a s3:// URI, but object storage is not "
        "supported yet: give a folder (a local disk, or an NFS mount that every node shares)\n"), proc.stderr
