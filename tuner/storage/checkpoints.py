"""A trial's checkpoints between the node that runs it and the sweep's storage.

A checkpoint is first written to the trial's folder on the node where the trial runs. With object
storage (:attr:`TrialInfo.storage`) :func:`publish_checkpoint` then uploads it from that node
straight to the trial's folder there and gives back its URI, which the store records; the local
copy goes (a node's disk does not fill with checkpoints). :func:`fetch_checkpoint` turns a recorded
URI back into a local folder on whichever node restores it: a restart elsewhere, a PBT exploit of
another trial's checkpoint, a resume on another machine. With a plain folder on a cluster of
several nodes, checkpoints travel to and from the driver's disk through the sweep's keeper
(:mod:`.keeper`).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from .location import Storage, is_uri, open_storage

__all__ = ["fetch_checkpoint", "publish_checkpoint", "storage_of", "upload_checkpoint", "upload_target"]

#: The folder under a trial's local folder where fetched checkpoints are put.
FETCHED = ".fetched"


def publish_checkpoint(path: str, info: Any) -> str:
    """The checkpoint folder ``path`` (on this node) where the sweep keeps it: its URI in the
    sweep's object storage once uploaded there, else ``path`` itself (sent to the driver's disk
    first, through the sweep's keeper, when this is another node of a cluster)."""
    uri = upload_target(path, info)
    if uri is None:
        keeper = getattr(info, "keeper", None)
        if keeper is not None and not _on_node(info.driver_node):
            import ray

            from .keeper import pack

            if not ray.get(keeper.put.remote(path, pack(path))):
                # the driver's disk has it now; a restore here fetches it back (a node's disk
                # does not fill with checkpoints that num_to_keep prunes on the driver's)
                shutil.rmtree(path, ignore_errors=True)
        return path
    return upload_checkpoint(path, uri, info)


def upload_target(path: str, info: Any) -> str | None:
    """The URI :func:`publish_checkpoint` uploads the checkpoint folder ``path`` to; None when the
    sweep keeps its checkpoints in a folder (nothing to upload, the path is the checkpoint)."""
    storage: Storage | None = getattr(info, "storage", None)
    if storage is None or storage.is_local or not info.storage_dir:
        return None
    return f"{info.storage_dir.rstrip('/')}/{os.path.basename(path.rstrip(os.sep))}"


def upload_checkpoint(path: str, uri: str, info: Any) -> str:
    """Upload the checkpoint folder ``path`` to ``uri`` in the sweep's object storage, then remove
    the local copy; returns ``uri``. Safe to run on a thread of its own (the trial's actor uploads
    one checkpoint while the trainable runs its next iteration)."""
    try:
        info.storage.upload(path, uri)
    except OSError as exc:
        raise OSError(f"trial {info.trial_name}: cannot upload its checkpoint to {uri}: {_line(exc)}") from exc
    shutil.rmtree(path, ignore_errors=True)
    return uri


def fetch_checkpoint(path: str, info: Any) -> str:
    """A local folder holding the checkpoint recorded as ``path``: ``path`` itself when it is a
    folder, else (a URI) a fresh copy under the trial's local folder. A checkpoint that cannot be
    fetched is one FileNotFoundError naming the trial and the checkpoint."""
    if not is_uri(path):
        keeper = getattr(info, "keeper", None)
        if os.path.isdir(path) or keeper is None:
            return path
        import ray

        from .keeper import unpack

        data = ray.get(keeper.get.remote(path))  # made on another node: from the driver's disk
        if data is None:
            raise FileNotFoundError(f"trial {info.trial_name}: cannot fetch its checkpoint {path}: it is not on the "
                                    f"driver's disk either")
        unpack(data, path, replace=False)  # another trial here may be fetching it too
        return path
    local = os.path.join(info.trial_dir, FETCHED, path.rstrip("/").rsplit("/", 1)[-1])
    shutil.rmtree(local, ignore_errors=True)
    try:
        storage_of(path, getattr(info, "storage", None)).download(path, local)
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"trial {info.trial_name}: cannot fetch its checkpoint {path}: {_line(exc)}") from None
    return local


def _on_node(node: str | None) -> bool:
    """Whether this process runs on the node ``node`` (the driver's)."""
    import ray

    return node is None or str(ray.get_runtime_context().get_node_id()) == node


def storage_of(uri: str, known: Storage | None = None) -> Storage:
    """The storage that holds ``uri``: ``known`` when it does, else the filesystem of the URI's
    scheme (configured from the environment, as for a new sweep)."""
    if known is not None and not known.is_local and known.owns(uri):
        return known
    return open_storage(uri.rstrip("/").rsplit("/", 1)[0])


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
