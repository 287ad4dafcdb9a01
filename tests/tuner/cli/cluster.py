"""A real local Ray cluster for the tests of `tuner submit`: `ray start --head --block` with the
Jobs API (the dashboard) and Ray's token authentication as `ray start` sets it up, stopped at the
end with every process it started (job drivers included) gone."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.conftest import LOOPBACK_ONLY

#: The loopback address a worker node of a test cluster lives on (the head's is 127.0.0.1).
WORKER_NODE_IP = "127.0.0.2"


def free_port(preferred: int | None = None) -> int:
    for port in ([preferred] if preferred else []):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                pass
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class Cluster:
    process: subprocess.Popen
    address: str  # the Jobs API, http://127.0.0.1:PORT
    gcs_address: str
    log: Path
    temp_dir: str

    def stop(self) -> list[str]:
        """Stop the cluster; the command lines of processes that outlived it (then killed)."""
        try:
            family = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        _, alive = psutil.wait_procs(family, timeout=30)
        left = []
        for proc in alive:
            try:
                left.append(" ".join(proc.cmdline())[:200])
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return left


def start_cluster(tmp: Path, cpus: int = 2, agent_port: int | None = None,
                  env_vars: dict[str, str] | None = None) -> Cluster:
    """`ray start --head --block` in a session of its own, from this interpreter's environment
    (its `python` first on PATH: the Jobs' entrypoints run `python`) and ``env_vars`` (what a
    cluster's pods get from their spec: credentials, say); its job agent listens on
    ``agent_port`` (default: a free port)."""
    # a port of its own, not Ray's or 6390: a head stopped a moment before may still hold its GCS session there
    gcs_port = free_port()
    dashboard_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env.update(env_vars or {})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # A node that dies is found dead in about 3 s, not Ray's default half a minute or more.
    env.update(RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3",
               RAY_health_check_timeout_ms="1000")
    log = tmp / "ray_start.log"
    # The cluster's token in ~/.ray/auth_token, where its clients and joining nodes read it
    # (`ray start --head` alone keeps a token it makes to itself).
    subprocess.run([str(Path(sys.executable).parent / "ray"), "get-auth-token", "--generate"], env=env,
                   capture_output=True, check=True)
    # A temp dir of its own: a ray.init() elsewhere on this machine must never find and join it.
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths live under it
    command = [
        str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={gcs_port}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}",
        f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={agent_port or free_port()}",
        f"--num-cpus={cpus}", "--disable-usage-stats", f"--temp-dir={temp_dir}", "--node-ip-address=127.0.0.1",
    ]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    cluster = Cluster(process, f"http://127.0.0.1:{dashboard_port}", f"127.0.0.1:{gcs_port}", log, temp_dir)
    deadline = time.monotonic() + 120
    while not _jobs_api_answers(cluster.address):
        if process.poll() is not None or time.monotonic() > deadline:
            cluster.stop()
            raise RuntimeError(f"ray start did not bring up the Jobs API: {log.read_text()[-2000:]}")
        time.sleep(0.5)
    return cluster


def _jobs_api_answers(address: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{address}/api/version", timeout=2):
            return True
    except urllib.error.HTTPError:  # it answers (asking for a token, say)
        return True
    except OSError:
        return False


@dataclasses.dataclass
class WorkerNode:
    """A worker node of a test cluster, in a mount namespace of its own."""

    process: subprocess.Popen
    log: Path

    def kill(self) -> None:
        """Lose the node: every process of it killed at once (as a machine that died)."""
        try:
            family = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        for proc in [*family, psutil.Process(self.process.pid)] if self.process.poll() is None else family:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        self.process.wait()

    stop = kill


def add_private_node(cluster: Cluster, tmp: Path, private: Path, cpus: int = 2,
                     resources: dict[str, float] | None = None) -> WorkerNode:
    """Join a worker node to ``cluster`` that does not share ``private`` with the head: started as
    root under `unshare -m`, it sees an empty tmpfs of its own over that folder (two machines, two
    disks), and over the cluster's temp folder (its sockets and logs are its own); every port its
    own, on a loopback address of its own (``WORKER_NODE_IP``). Returns once the cluster counts it."""
    import json

    if os.geteuid() != 0:
        raise RuntimeError("a node with a disk of its own needs root (unshare -m, mount)")
    private.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["RAY_AUTH_MODE"] = "token"  # a joining node sends the cluster's token (~/.ray/auth_token)
    # `ray start` joins no node to a one-machine Ray, and a node of a cluster of machines takes
    # 127.0.0.1 (its own, or in the head's address) for the machine's routable address: the node
    # is a second machine on a loopback address of its own, and reaches the head's GCS (which
    # listens on 127.0.0.1 alone) at that address in its IPv6-mapped form, which Ray leaves as it is.
    env[LOOPBACK_ONLY] = "1"
    gcs_port = cluster.gcs_address.rsplit(":", 1)[1]
    ports = [free_port() for _ in range(6)]
    ray_start = [
        str(Path(sys.executable).parent / "ray"), "start", "--block", f"--address=[::ffff:127.0.0.1]:{gcs_port}",
        f"--node-ip-address={WORKER_NODE_IP}", f"--num-cpus={cpus}", f"--node-manager-port={ports[0]}",
        f"--object-manager-port={ports[1]}", f"--metrics-export-port={ports[2]}",
        f"--dashboard-agent-listen-port={ports[3]}", f"--dashboard-agent-grpc-port={ports[4]}",
        f"--runtime-env-agent-port={ports[5]}", "--min-worker-port=23000", "--max-worker-port=23999",
        "--disable-usage-stats", *([f"--resources={json.dumps(resources)}"] if resources else []),
    ]
    script = (f"mount -t tmpfs tmpfs {private} && mount -t tmpfs tmpfs {cluster.temp_dir} && exec "
              + " ".join(f"'{part}'" for part in ray_start))
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "worker_node.log"
    deadline = time.monotonic() + 60
    while (before := _alive_nodes(cluster)) < 1:  # the head itself first
        if time.monotonic() > deadline:
            raise RuntimeError("the head node never showed as alive")
        time.sleep(0.3)
    with open(log, "w") as out:
        process = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=env,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    node = WorkerNode(process, log)
    deadline = time.monotonic() + 120
    while _alive_nodes(cluster) <= before:
        if process.poll() is not None or time.monotonic() > deadline:
            node.kill()
            raise RuntimeError(f"the worker node did not join: {log.read_text()[-2000:]}")
        time.sleep(0.5)
    return node


def _alive_nodes(cluster: Cluster) -> int:
    """How many nodes the cluster counts alive (asked through its dashboard, as any client would)."""
    import urllib.request

    request = urllib.request.Request(f"{cluster.address}/api/v0/nodes")
    token = _token()
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            import json

            nodes = json.load(answer)["data"]["result"]["result"]
    except (OSError, KeyError, ValueError):
        return 0
    return sum(1 for node in nodes if node.get("state") == "ALIVE")


def _token() -> str | None:
    path = Path.home() / ".ray" / "auth_token"
    return path.read_text().strip() if path.exists() else os.environ.get("RAY_AUTH_TOKEN")
