"""Benchmarks talk to loopback only: the Ray they start advertises 127.0.0.1.

Ray turns a node address of 127.0.0.1 into the machine's routable one unless it is told that it
spans one machine (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when Ray is imported): set here,
for this process and the Ray processes it starts, before ``ray.init``.
"""

from __future__ import annotations

import os

ONE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def loopback_only() -> None:
    """Make the Ray this process starts (or a local test cluster's nodes) live on 127.0.0.1."""
    os.environ[ONE_MACHINE] = "0"
    import ray._private.ray_constants as ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # read at call time; the import may have come first
