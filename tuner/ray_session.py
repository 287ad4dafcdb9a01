"""Starting Ray, or joining the one that is running."""

from __future__ import annotations

import logging
import os

import ray


def ensure_ray(address: str | None = None) -> None:
    """Reuse the Ray instance this process already joined; else join ``address`` (or
    ``$RAY_ADDRESS``); else start a local one sized to this machine."""
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    ray.init(
        address=address,
        include_dashboard=False,
        logging_level=logging.WARNING,
        log_to_driver=True,
    )
