"""The HParams export through a real ``tensorboard`` server: the HTTP requests the dashboard sends."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.tuner.tensorboard.expected import check_domains, expected_sessions
from tuner.tensorboard.reader import EXPERIMENT_REQUEST, session_groups_request, sessions_table

pytestmark = pytest.mark.usefixtures("ray_session")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, route: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/data/plugin/hparams/{route}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_real_tensorboard_server_shows_every_trial(hparams_sweep, tmp_path):
    expected = expected_sessions(hparams_sweep.run_dir, "train")
    port = _free_port()
    log = open(tmp_path / "tensorboard.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(hparams_sweep.logdir), "--port", str(port),
         "--host", "127.0.0.1", "--reload_interval", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 45
        experiment, sessions = None, {}
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "tensorboard.log").read_text()
            try:
                experiment = _post(port, "experiment", EXPERIMENT_REQUEST)
                if experiment.get("metricInfos"):
                    sessions = sessions_table(_post(port, "session_groups", session_groups_request(experiment)))
                    if sessions == expected:  # every run loaded (the server loads them in the background)
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        else:
            assert sessions == expected, (tmp_path / "tensorboard.log").read_text()

        hparams = {h["name"]: h for h in experiment["hparamInfos"]}
        assert "domainInterval" in hparams["lr"] and "domainInterval" in hparams["model.w"]
        assert "domainInterval" in hparams["model.depth"] and hparams["g"]["domainDiscrete"] == [1.0, 2.0, 3.0]
        assert hparams["act"]["domainDiscrete"] == ["relu", "tanh"]
        assert experiment["metricInfos"][0]["name"] == {"tag": "score", "group": ""}
        assert sessions == expected
        check_domains(experiment, sessions)
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)  # the server and its data-server child
        except ProcessLookupError:
            pass
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
