"""Arguments of a hot actor call packed into one ``bytes`` value.

Ray handles each argument of an actor call on its own (serialization context, a task argument
in the core worker), so a call with eight arguments costs the driver several times the CPU of a
call with one ``bytes`` argument. The controller makes one such call per trial, so it packs them
with cloudpickle (like Ray, it takes what the user defined in ``__main__`` by value) and the
actor unpacks them.

Ray's references (``ObjectRef``, actor handles) are not packed: Ray counts the references a call
carries only when it serializes them itself, so :func:`pack` returns None for arguments that hold
one, and for anything cloudpickle cannot take, and the caller falls back to Ray's own path.
"""

from __future__ import annotations

import collections
import io
import pickle
from typing import Any

import ray
from ray import cloudpickle
from ray.actor import ActorHandle


class _RayReference(Exception):
    """Raised while packing when the arguments hold a Ray reference."""


def _refuse(obj: object) -> Any:
    raise _RayReference(type(obj).__name__)


class _Pickler(cloudpickle.CloudPickler):
    dispatch_table = collections.ChainMap(
        {ray.ObjectRef: _refuse, ActorHandle: _refuse}, cloudpickle.CloudPickler.dispatch_table
    )


def pack(kwargs: dict[str, Any]) -> bytes | None:
    """The keyword arguments as bytes for :func:`unpack`, or None when Ray must carry them.

    Example:
        >>> unpack(pack({"max_results": 10, "config": {"lr": 0.1}}))
        {'max_results': 10, 'config': {'lr': 0.1}}
    """
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(kwargs)
    except Exception:  # noqa: BLE001 - a Ray reference, or what only Ray's serializer takes
        return None
    return buffer.getvalue()


def unpack(payload: bytes) -> dict[str, Any]:
    """The keyword arguments :func:`pack` packed."""
    kwargs = pickle.loads(payload)
    if not isinstance(kwargs, dict):
        raise TypeError(f"a packed call holds a dict of keyword arguments, got {type(kwargs).__name__}")
    return kwargs
