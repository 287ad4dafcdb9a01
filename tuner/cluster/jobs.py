"""A sweep's driver as a Ray Job: Ray's Job Submission API (``ray.job_submission``), with every
failure said in one line (:class:`ClusterError`) that names the address and what to do."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tuner.cluster.auth import missing_token_hint, use_cluster_token

__all__ = ["ADDRESS_ENVS", "ClusterError", "ClusterJobs", "JobState", "jobs_address"]

#: Where the Jobs API's address comes from when no --address is given (as Ray's own CLI reads it).
ADDRESS_ENVS = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
#: How long a submission waits for a newly started head node's job agent.
AGENT_WAIT_S = 60.0
#: Job states after which nothing more happens.
ENDED = ("SUCCEEDED", "FAILED", "STOPPED")


class ClusterError(RuntimeError):
    """The cluster cannot be reached, refused this machine, or has no such job (one line)."""


def jobs_address(given: str | None) -> str:
    """The Jobs API URL to talk to: ``given``, else ``$RAY_API_SERVER_ADDRESS`` or an http
    ``$RAY_ADDRESS``; ``HOST:PORT`` means ``http://HOST:PORT``. A ``ray://`` or missing address is
    a ValueError naming what is expected."""
    address = given
    if not address:
        address = os.environ.get("RAY_API_SERVER_ADDRESS") or ""
        ray_address = os.environ.get("RAY_ADDRESS") or ""
        if not address and ray_address.startswith(("http://", "https://")):
            address = ray_address
    if not address:
        raise ValueError("--address: the cluster's Jobs API is needed, e.g. --address http://HEAD:8265 (the head "
                         "node's dashboard), or $RAY_API_SERVER_ADDRESS")
    if address.startswith("ray://") or address in ("auto", "local"):
        raise ValueError(f"--address: {address!r} is not the Jobs API; give the head node's dashboard address, "
                         f"e.g. http://HEAD:8265")
    if "://" not in address:
        address = f"http://{address}"
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--address: expected http://HOST:PORT (the head node's dashboard), got {given or address!r}")
    return address.rstrip("/")


@dataclass(frozen=True)
class JobState:
    """What the cluster says of a job: its status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED),
    Ray's message, and the driver's exit code once it ended."""

    status: str
    message: str
    exit_code: int | None

    @property
    def ended(self) -> bool:
        return self.status in ENDED


class ClusterJobs:
    """The Jobs API of one cluster. Construction checks that it answers (and takes this
    machine's token): a ClusterError says why not."""

    def __init__(self, address: str) -> None:
        self.address = address
        use_cluster_token()
        from ray.job_submission import JobSubmissionClient

        self._client = self._call(lambda: JobSubmissionClient(address), "reach")

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        from ray.exceptions import AuthenticationError

        try:
            return fn()
        except AuthenticationError:
            raise ClusterError(f"Ray at {self.address}: {missing_token_hint()}") from None
        except ConnectionError as exc:
            raise ClusterError(
                f"cannot {what} the Ray Jobs API at {self.address} ({_first_line(exc)}): is that the head node's "
                f"dashboard (`ray start --head --include-dashboard true`, port 8265 by default)?") from None
        except RuntimeError as exc:  # the API answered with an error
            raise ClusterError(f"Ray at {self.address}: cannot {what}: {_first_line(exc)}") from None

    def submit(self, *, entrypoint: str, submission_id: str, runtime_env: dict[str, Any],
               metadata: dict[str, str]) -> str:
        """Submit the driver; its submission id."""
        def submit() -> str:
            return str(self._client.submit_job(
                entrypoint=entrypoint, submission_id=submission_id, runtime_env=runtime_env, metadata=metadata))

        deadline = time.monotonic() + AGENT_WAIT_S
        with _quiet("ray.dashboard.modules.dashboard_sdk", "ray._private.runtime_env.packaging"):  # upload notices
            while True:
                try:
                    return str(self._call(submit, "submit to"))
                except ClusterError as exc:
                    # A cluster that has just started has a dashboard before the agent that runs jobs.
                    if "No available agent" not in str(exc):
                        raise
                    failed, why = self._agent_trouble()
                    if failed or time.monotonic() > deadline:
                        raise ClusterError(f"{exc}: {why}" if why else f"{exc} (for {AGENT_WAIT_S:g} s)") from None
                time.sleep(1.0)

    def _agent_trouble(self) -> tuple[bool, str | None]:
        """(whether the job agent failed for good, why) as its log on the head says, when the
        head's session folder is on this machine; else where that log is."""
        try:
            nodes = self._client._do_request("GET", "/nodes?view=summary").json()["data"]["summary"]
        except Exception:  # noqa: BLE001 - nothing more to say than Ray's own line
            return False, None
        for node in nodes:
            raylet = node.get("raylet") or {}
            session = raylet.get("sessionDir")
            if not session or not raylet.get("isHeadNode", True):
                continue
            log = Path(session) / "logs" / "dashboard_agent.log"
            try:
                lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-400:]
            except OSError:
                return False, f"its job agent is not up; the head node's {log} says why"
            failed = next((line for line in lines if "failed to bind after" in line), None)
            tried = next((line for line in reversed(lines) if "Failed to bind to port" in line), None)
            if failed or tried:
                port = re.search(r"port #?(\d+)", failed or tried or "")
                what = f"port {port.group(1)}" if port else "its port"
                return failed is not None, (
                    f"the head node's job agent cannot listen on {what}: it is in use by another process ({log}); "
                    f"start the head with a free --dashboard-agent-listen-port")
        return False, None

    def state(self, job_id: str) -> JobState:
        info = self._call(lambda: self._client.get_job_info(job_id), f"read job {job_id} of")
        return JobState(str(getattr(info.status, "value", info.status)), info.message or "", info.driver_exit_code)

    def stop(self, job_id: str) -> bool:
        """Ask Ray to stop the job (its driver gets SIGTERM); False if it had ended already."""
        return bool(self._call(lambda: self._client.stop_job(job_id), f"stop job {job_id} at"))

    def logs(self, job_id: str) -> str:
        return str(self._call(lambda: self._client.get_job_logs(job_id), f"read the logs of job {job_id} at"))

    def follow_logs(self, job_id: str, write: Callable[[str], None]) -> None:
        """Write the job's output as it comes, until the job ends."""

        async def tail() -> None:
            async for chunk in self._client.tail_job_logs(job_id):
                write(chunk)

        with _quiet("ray.dashboard.modules.job.sdk"):  # its "WebSocket closed" line when the job ends
            self._call(lambda: asyncio.run(tail()), f"follow the logs of job {job_id} at")


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Ray's loggers ``names`` say only warnings and errors inside the block."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].rstrip(".") if lines else type(exc).__name__
