"""Whether a sweep's driver is alive, seen from any machine that reads its store.

A running driver stamps its experiment's ``heartbeat_at`` every :func:`interval_s` seconds from a
thread of its own. A driver that dies without a word (SIGKILL, its node lost, a store that stopped
taking writes) leaves the sweep RUNNING in the store; once its heartbeat is older than
:func:`stale_after_s` the query verbs show it as INTERRUPTED, which is what it is: ``tuner resume``
continues it. Readers compare with their own clock: machines of one cluster keep theirs within a
few seconds of each other (NTP), far below the margin.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
import time
from types import TracebackType
from typing import Any, Mapping

from tuner.store import Store
from tuner.sweep_status import SweepStatus

logger = logging.getLogger(__name__)

__all__ = ["HEARTBEAT_ENV", "Heartbeat", "interval_s", "owner", "shown_status", "stale_after_s"]

#: Seconds between two heartbeats (default 5); the environment variable lets tests wait less.
HEARTBEAT_ENV = "TUNER_HEARTBEAT_S"
#: A heartbeat this many intervals old means the driver is gone.
MISSED_BEATS = 4


def interval_s() -> float:
    """Seconds between a driver's heartbeats: ``$TUNER_HEARTBEAT_S``, else 5."""
    try:
        value = float(os.environ.get(HEARTBEAT_ENV, "5"))
    except ValueError:
        value = 5.0
    return value if value > 0 else 5.0


def stale_after_s() -> float:
    """How old a RUNNING sweep's heartbeat may be before the sweep is shown as INTERRUPTED."""
    return MISSED_BEATS * interval_s()


def owner() -> str:
    """Who starts a sweep here: ``$TUNER_OWNER`` (set by ``tuner submit`` for the job's driver), else user@host."""
    given = os.environ.get("TUNER_OWNER")
    if given:
        return given
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def shown_status(experiment: Mapping[str, Any], now: float | None = None) -> str:
    """A sweep's status as it is: its stored status, except that a RUNNING sweep whose driver's
    heartbeat stopped is INTERRUPTED (a sweep of a version without heartbeats stays RUNNING)."""
    status = str(experiment.get("status") or "")
    beat = experiment.get("heartbeat_at")
    if status == SweepStatus.RUNNING and isinstance(beat, (int, float)):
        if (time.time() if now is None else now) - float(beat) > stale_after_s():
            return SweepStatus.INTERRUPTED
    return status


class Heartbeat:
    """While the block runs, a daemon thread stamps the experiment's heartbeat every
    :func:`interval_s` seconds (the first at once), and keeps the driver's lock on the sweep
    (``lock.keep()``: a database lock lost with its session, a server restart, is taken again)."""

    def __init__(self, store: Store, experiment_id: int, lock: Any = None) -> None:
        self._store = store
        self._experiment_id = experiment_id
        self._lock = lock
        self._lost_said = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tuner-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        interval = interval_s()
        while True:
            self._store.beat(self._experiment_id)
            lost = self._lock.keep() if self._lock is not None else None
            if lost is not None and not self._lost_said:
                self._lost_said = True
                logger.error("this driver lost its lock on the sweep (the database ended its session): %s", lost)
            if self._stop.wait(interval):
                return
