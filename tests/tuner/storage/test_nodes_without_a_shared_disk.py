"""A Ray cluster of two nodes that share no disk (the worker sees an empty tmpfs of its own over
the storage folder, as two machines have two disks): a PBT sweep whose exploits cross nodes, a
trial whose node dies, and a submitted sweep stopped and resumed as a Ray Job, each with a plain
storage folder (checkpoints travel through Ray) and with object storage (every node reads and
writes the bucket; the cluster's nodes hold its credentials, as a KubeRay pod's spec gives them)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.tuner.cli.cluster import add_private_node, start_cluster
from tests.tuner.cli.conftest import cli_in
from tests.tuner.cli.test_cluster import SLOW_SPEC, SLOW_TRAIN, results

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(os.geteuid() != 0, reason="a node with a disk of its own needs root (unshare -m)")]


class TwoNodes:
    """The head (2 CPUs; the test's drivers run there) and a worker node (2 CPUs) whose view of
    ``storage`` is a tmpfs of its own; a test that kills the worker asks for a new one after."""

    def __init__(self, tmp: Path, env_vars: dict[str, str]) -> None:
        self.tmp, self.storage = tmp, tmp / "storage"
        self.local = tmp / "head_local"  # a job's local run directories, with object storage
        self.head = start_cluster(tmp, cpus=2, env_vars={**env_vars, "TUNER_STORAGE_PATH": str(self.local)})
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
def two_nodes(tmp_path_factory, s3_server):
    nodes = TwoNodes(tmp_path_factory.mktemp("two_nodes"), s3_server.env)
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
    # The worker's disk does not fill: what it sent on (to the bucket or the driver's disk) goes
    # from it; what stays is a checkpoint it restored from (one per pause of synchronous PBT at most).
    on_worker = [counts for t in trials for node, counts in t["per_node"].items() if node != report["head"]]
    assert max(ran for ran, _ in on_worker) >= 6, trials  # else there was little to prune
    assert max(held for _, held in on_worker) <= 3, trials


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


def _tuner(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return cli_in(cwd, args, timeout=300, env=env, sweeps_here=False)


def test_a_submitted_sweep_stopped_wiped_and_resumed_from_elsewhere_finishes_every_trial(
        cluster, where, two_nodes, tmp_path, postgres_url):
    """`tuner submit` of 4 checkpointing trials (1 CPU each, the whole cluster's share: both nodes
    hold two), `tuner stop` once
    each holds 3 checkpoints; with object storage every local folder of the sweep is then wiped (the
    bucket alone keeps its checkpoints); `tuner resume --submit` from a folder without the trainable
    finishes every trial from its checkpoint, each result once."""
    head, _, _ = cluster
    storage, env, local = where
    user, elsewhere, release = tmp_path / "user", tmp_path / "elsewhere", tmp_path / "release"
    user.mkdir()
    elsewhere.mkdir()
    (user / "slowtrain.py").write_text(SLOW_TRAIN)
    spec = (SLOW_SPEC.replace("ITERATIONS", "8").replace("{cpu: 0.5}", "{cpu: 1}")
            .replace("[1.0, 2.0]", "[1.0, 2.0, 3.0, 4.0]") + f"  release: {release}\ncpu_share: 1.0\n")
    (user / "spec.yaml").write_text(spec)
    env = {**env, "TUNER_DATABASE_URL": postgres_url}
    name = f"job_{int(time.time() * 1000) % 10**8}"
    submit = _tuner(user, "submit", "spec.yaml", "--name", name, "--address", head.address, "--storage-path",
                    storage, env=env)
    assert submit.returncode == 0, submit.stdout + submit.stderr
    deadline = time.monotonic() + 180
    while len(results(postgres_url, name)) < 12:  # all 4 at once, holding: both nodes run trials
        assert time.monotonic() < deadline, (results(postgres_url, name), _tuner(user, "logs", name, env=env).stdout)
        time.sleep(0.3)
    stop = _tuner(user, "stop", name, env=env)
    assert stop.returncode == 0 and "the sweep is INTERRUPTED" in stop.stdout, stop.stdout + stop.stderr
    if storage.startswith("s3://"):
        for folder in (two_nodes.local / name, local / name):
            shutil.rmtree(folder, ignore_errors=True)
        assert not (two_nodes.local / name).exists()
    release.touch()
    resume = _tuner(elsewhere, "resume", name, "--submit", "--wait", env=env)
    assert resume.returncode == 0, resume.stdout + resume.stderr + _tuner(elsewhere, "logs", name, env=env).stdout[-6000:]
    assert f"job SUCCEEDED: sweep {name} TERMINATED, 4/4 trials ended" in resume.stdout, resume.stdout
    per_trial: dict[str, list[int]] = {}
    for trial_id, iteration in results(postgres_url, name):
        per_trial.setdefault(trial_id, []).append(iteration)
    assert list(per_trial.values()) == [list(range(1, 9))] * 4, per_trial
