"""Handing a sweep's placement groups back so that the next sweep gets its own at once.

Removing a placement group is asynchronous, and a group asked for before Ray's view of the
cluster shows the resources back is retried with a backoff: measured here, a sweep started
right after another waited 0.36-0.74 s for its groups, against 5 ms once the view had caught up
(20-100 ms after the removal). The controller starts a watch when it gives its groups back
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

#: The thread watching the last sweep's resources come back (see watch_release).
_release_watch: threading.Thread | None = None


def watch_release(freed: Mapping[str, float]) -> None:
    """Watch, in the background, for Ray to show ``freed`` (resource name -> amount: the most a
    sweep's groups held at once) as available again."""
    global _release_watch
    _release_watch = threading.Thread(
        target=_await_release, args=(dict(freed), RELEASE_WAIT_S), name="tuner-release-watch", daemon=True
    )
    _release_watch.start()


def await_release() -> None:
    """Wait for the previous sweep's resources to show as available (at most ``RELEASE_WAIT_S``)."""
    watch = _release_watch
    if watch is not None:
        watch.join(RELEASE_WAIT_S)


def _await_release(freed: Mapping[str, float], timeout: float) -> None:
    """Wait (at most ``timeout`` s) until Ray shows ``freed`` as available again (as much of it
    as the cluster has, should it have shrunk since)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            total, available = ray.cluster_resources(), ray.available_resources()
        except Exception:  # noqa: BLE001 - Ray is going away: nothing to wait for
            return
        if all(available.get(k, 0.0) + 1e-9 >= min(v, total.get(k, 0.0)) for k, v in freed.items()):
            return
        time.sleep(0.005)
