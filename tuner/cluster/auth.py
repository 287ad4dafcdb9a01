"""The cluster's authentication token (Ray 2.60 clusters start with token authentication on).

Ray reads the token from ``$RAY_AUTH_TOKEN``, the file ``$RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token`` (where ``ray start`` writes it on the head node), but only once token mode is
on (``RAY_AUTH_MODE=token``), which Ray itself switches on only for ``ray.init(address="auto")``.
:func:`use_cluster_token` does the same for every address this process talks to: a token that is
here is used, authentication is never turned off.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

__all__ = ["AUTH_MODE_ENV", "missing_token_hint", "token_source", "use_cluster_token"]

AUTH_MODE_ENV = "RAY_AUTH_MODE"


def token_source() -> str | None:
    """Where this machine's Ray token is (an environment variable or a file), or None."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "$RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return path if Path(path).expanduser().is_file() else None
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def use_cluster_token() -> bool:
    """Send this machine's token to the clusters this process talks to (True), when there is one
    and ``RAY_AUTH_MODE`` does not say otherwise. Call before Ray connects anywhere."""
    mode = os.environ.get(AUTH_MODE_ENV)
    if mode is not None:
        return mode.lower() == "token"
    if token_source() is None:
        return False
    if "ray" not in sys.modules:  # Ray reads the variable when it starts its configuration
        os.environ[AUTH_MODE_ENV] = "token"
        return True
    try:  # Ray caches its configuration once imported: refresh it the way Ray does for "auto"
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # another Ray: the variable alone is read when Ray starts its configuration
        os.environ[AUTH_MODE_ENV] = "token"
        return True
    quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # Ray's "token authentication is enabled" notice
    try:
        return bool(maybe_enable_token_auth_if_token_available(warn_if_disabled=False))
    finally:
        quiet.setLevel(level)


def missing_token_hint() -> str:
    """What to do when a cluster asks for a token this machine does not have (one sentence)."""
    source = token_source()
    if source is None:
        return ("the cluster uses token authentication and this machine has no token: copy the head node's "
                "~/.ray/auth_token here (or set RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH)")
    return f"the cluster refused the token in {source}: it is not that cluster's (see the head's ~/.ray/auth_token)"
