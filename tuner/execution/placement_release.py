"""Handing a sweep's placement groups back so that the next sweep gets its own at once.

Removing a placement group is asynchronous, and a group asked for before Ray's view of the
cluster shows the resources back is retried with a backoff of several hundred milliseconds,
while the view itself catches up within about a hundred. The controller starts a watch when it gives its groups back
(:func:`watch_release`) and the next sweep in the process waits for it (:func:`await_release`)
before asking for groups; whatever the caller did in between overlaps with the wait.
"""

from __future__ import annotations

import threading
import time
from typing import Mapping

import ray

#: The longest a sweep waits for the previous one's resources to show as available.
RELEASE_WAIT_S = 1.0
#: The longest the watch looks (a caller may wait longer than a sweep does, e.g. a test).
WATCH_S = 60.0


class _Watch:
    """One release being watched: a thread polling Ray, an event set once the resources show."""

    def __init__(self, freed: Mapping[str, float]) -> None:
        self.released = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(dict(freed),), name="tuner-release-watch", daemon=True)
        self.thread.start()

    def _run(self, freed: Mapping[str, float]) -> None:
        if _await_release(freed, WATCH_S):
            self.released.set()


#: The last sweep's release being watched (see watch_release).
_watch: _Watch | None = None


def watch_release(freed: Mapping[str, float]) -> None:
    """Watch, in the background, for Ray to show ``freed`` (resource name -> amount: the most a
    sweep's groups held at once) as available again."""
    global _watch
    _watch = _Watch(freed)


def await_release(timeout_s: float = RELEASE_WAIT_S) -> bool:
    """Wait for the previous sweep's resources to show as available, at most ``timeout_s``; True
    once they do (or when no release is being watched), False when the wait ran out."""
    watch = _watch
    return watch is None or watch.released.wait(timeout_s)


def _await_release(freed: Mapping[str, float], timeout: float) -> bool:
    """Wait (at most ``timeout`` s) until Ray shows ``freed`` as available again (as much of it
    as the cluster has, should it have shrunk since); False if it did not."""
    start = time.monotonic()
    deadline = start + timeout
    while time.monotonic() < deadline:
        try:
            total, available = ray.cluster_resources(), ray.available_resources()
        except Exception:  # noqa: BLE001 - Ray is going away: nothing to wait for
            return True
        if all(available.get(k, 0.0) + 1e-9 >= min(v, total.get(k, 0.0)) for k, v in freed.items()):
            return True
        # quick while a sweep may be waiting on it, gently after that
        time.sleep(0.005 if time.monotonic() - start < RELEASE_WAIT_S else 0.1)
    return False
