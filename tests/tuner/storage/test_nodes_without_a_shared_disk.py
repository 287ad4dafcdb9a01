"""A Ray cluster of two nodes that share no disk (the worker sees an empty tmpfs of its own over
the storage folder, as two machines have two disks): a PBT sweep whose exploits cross nodes, and a
trial whose node dies, each with a plain storage folder (checkpoints travel through Ray) and with
object storage (every node reads and writes the bucket)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.tuner.cli.cluster import add_private_node, start_cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a node with a disk of its own needs root (unshare -m)")


class TwoNodes:
    """The head (2 CPUs; the test's drivers run there) and a worker node (2 CPUs) whose view of
    ``storage`` is a tmpfs of its own; a test that kills the worker asks for a new one after."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.storage = tmp, tmp / "storage"
        self.head = start_cluster(tmp, cpus=2)
        self.worker = None
        self.joined = 0

    def with_worker(self) -> "TwoNodes":
        if self.worker is None or self.worker.process.poll() is not None:
            self.joined += 1
            self.worker = add_private_node(self.head, self.tmp / f"worker{self.joined}", self.storage, cpus=2)
        return self

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        self.head.stop()


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    nodes = TwoNodes(tmp_path_factory.mktemp("two_nodes"))
    yield nodes
    nodes.stop()


@pytest.fixture
def cluster(two_nodes):
    two_nodes.with_worker()
    return two_nodes.head, two_nodes.worker, two_nodes.storage


def _driver(head, storage: str, name: str, mode: str, env: dict[str, str]) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    full.update(RAY_ADDRESS=head.gcs_address, RAY_AUTH_MODE="token", **env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", "tests.tuner.storage.two_node_sweep", mode, storage, name], cwd=ROOT,
                            env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _report(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-4000:]
    line = next((line for line in out.splitlines() if line.startswith("REPORT ")), None)
    assert line is not None, out[-3000:] + err[-3000:]
    return json.loads(line.removeprefix("REPORT "))


@pytest.fixture(params=["folder", "s3"])
def where(request, cluster, tmp_path):
    """(storage_path, the driver's extra environment, the folder of its local run directories)."""
    _, _, storage = cluster
    local = tmp_path / "local"
    if request.param == "folder":
        return str(storage), {}, storage
    server = request.getfixturevalue("s3_server")
    return server.uri(tmp_path.name), {**server.env, "TUNER_STORAGE_PATH": str(local)}, local


def test_a_pbt_sweep_whose_exploits_cross_nodes_finishes_with_every_trial(cluster, where):
    head, _, _ = cluster
    storage, env, _ = where
    name = f"pbt_{int(time.time() * 1000) % 10**8}"
    report = _report(_driver(head, storage, name, "pbt", env))
    trials = report["trials"]
    assert [t["status"] for t in trials] == ["TERMINATED"] * 4, [t["error"] for t in trials]
    assert all(t["iterations"] == list(range(1, 13)) for t in trials), [t["iterations"] for t in trials]
    assert len({node for t in trials for node in t["nodes"]}) == 2  # the trials ran on both nodes
    assert report["exploits"] >= 2


def _results(db: Path, name: str) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM results r JOIN experiments e ON e.id = r.experiment_id "
                            "WHERE e.name = ?", (name,)).fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def test_a_trial_whose_node_dies_goes_on_elsewhere_from_its_checkpoint(cluster, where):
    """The trial starts on the worker node (the head's CPUs are held), which is then killed (every
    process of it at once, as a machine that died): the trial goes on on the head from its last
    checkpoint, each result once."""
    head, worker, _ = cluster
    storage, env, local = where
    name = f"loss_{int(time.time() * 1000) % 10**8}"
    db = local / name / "tuner.db"
    proc = _driver(head, storage, name, "loss", env)
    deadline = time.monotonic() + 120
    while _results(db, name) < 5:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.1)
    worker.kill()
    report = _report(proc)
    (trial,) = report["trials"]
    assert trial["status"] == "TERMINATED", trial["error"]
    assert trial["iterations"] == list(range(1, 41))  # every iteration once: none lost, none twice
    assert len(trial["nodes"]) == 2 and max(trial["resumed_from"]) >= 5, trial
