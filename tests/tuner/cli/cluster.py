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

GCS_PORT = 6390  # Redis holds Ray's default 6379 on these machines


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


def start_cluster(tmp: Path, cpus: int = 2, agent_port: int | None = None) -> Cluster:
    """`ray start --head --block` in a session of its own, from this interpreter's environment
    (its `python` first on PATH: the Jobs' entrypoints run `python`); its job agent listens on
    ``agent_port`` (default: a free port)."""
    gcs_port = free_port(GCS_PORT)
    dashboard_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    log = tmp / "ray_start.log"
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
