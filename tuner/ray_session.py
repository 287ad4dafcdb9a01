"""Starting Ray, or joining the one that is running."""

from __future__ import annotations

import logging
import os
import socket

import ray

#: How long the probe of a Ray address waits for a TCP connection (ray.init itself retries for minutes).
PROBE_TIMEOUT_S = 3.0


class RayUnreachableError(ConnectionError):
    """Nothing answers at the Ray address this process was told to join."""


def _host_port(address: str) -> tuple[str, int] | None:
    """The host and port a GCS address (``host:port``) or a Ray client address (``ray://host:port``)
    names; None for what Ray resolves itself ("auto", "local", ...) or a form without a port."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or "/" in target or not port.isdigit():
        return None
    return host.removeprefix("[").removesuffix("]"), int(port)


def check_ray_address(address: str | None = None) -> None:
    """Raise :class:`RayUnreachableError` at once when nothing accepts a TCP connection at the Ray
    address this process would join (``address``, else ``$RAY_ADDRESS``); a no-op when this process
    already joined Ray, or when it would start its own."""
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    target = _host_port(address) if address else None
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc) or type(exc).__name__
        raise RayUnreachableError(
            f"cannot reach Ray at {address!r} ({reason.lower()}): start it there (`ray start --head`) "
            f"or give the address of a running cluster"
        ) from None


def ensure_ray(address: str | None = None) -> None:
    """Reuse the Ray instance this process already joined; else join ``address`` (or
    ``$RAY_ADDRESS``), failing at once when nothing answers there; else start a local one sized
    to this machine."""
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    check_ray_address(address)
    if address:  # a cluster with token authentication gets this machine's token (Ray does so only for "auto")
        from tuner.cluster.auth import use_cluster_token

        use_cluster_token()
    ray.init(
        address=address,
        include_dashboard=False,
        logging_level=logging.WARNING,
        log_to_driver=True,
    )
