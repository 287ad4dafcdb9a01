"""Checkpoints through Ray, for a sweep stored in a plain folder on a cluster whose nodes share no
disk (Ray Tune's old head-node sync).

The driver's node holds the sweep's folder. A :class:`CheckpointKeeper` actor pinned to that node
takes each checkpoint a trial writes on another node (packed into one archive, sent through Ray's
object store) and writes it at the same path on the driver's disk; a trial restored on a node
that does not have a checkpoint (a restart after its node was lost, a PBT exploit of a trial that
ran elsewhere) gets it back from the keeper. On one machine nothing travels: the controller makes
the keeper once it sees a second node, and a trial on the driver's node writes straight to disk.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["CheckpointKeeper", "pack", "start_keeper", "unpack"]


def pack(folder: str) -> bytes:
    """The folder's files as one tar archive (paths relative to it)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(folder, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, folder: str, replace: bool = True) -> None:
    """Write the archive :func:`pack` made into ``folder``, extracted beside it and renamed into
    place: a reader never sees half a checkpoint. Without ``replace`` a folder already there stays
    (a checkpoint is the same wherever it was fetched from: two trials of this node fetching one
    donor's at once both read the first copy, which neither deletes). With it the new one takes the
    old one's place (a trial that went back to an earlier checkpoint made this one again): the old
    one is renamed aside first, so the folder is missing only between two renames."""
    target = Path(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".incoming", dir=target.parent))
    os.chmod(tmp, 0o755)  # as a folder made the usual way: other users of a shared disk read it
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
            archive.extractall(tmp, filter="data")
        while True:
            try:
                os.rename(tmp, target)  # fails on a folder there already (a non-empty one)
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                if not replace:
                    if target.is_dir():
                        return
                    continue  # a writer moved it aside just now: put this one in its place
            aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            try:
                os.rename(target, aside / "old")
            except FileNotFoundError:
                pass  # another writer moved it first; try again
            shutil.rmtree(aside, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _listing(folder: str) -> dict[str, str]:
    """Each file under ``folder`` (path relative to it) -> the digest of its bytes."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def _archive_listing(data: bytes) -> dict[str, str]:
    """:func:`_listing` of the folder an archive :func:`pack` made holds."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
        for member in archive.getmembers():
            if member.isfile():
                content = archive.extractfile(member)
                assert content is not None
                out[os.path.normpath(member.name)] = hashlib.sha256(content.read()).hexdigest()
    return out


#: Locks the keeper's calls on one path take (a path hashes to one of them): its actor runs
#: several calls at once, and a put that compares a folder with its archive must not read it
#: while another put of the same checkpoint moves it aside.
_PATH_LOCKS = 64


class CheckpointKeeper:
    """Keeps checkpoints on the disk of the node it runs on (the driver's)."""

    def __init__(self) -> None:
        self._locks = [threading.Lock() for _ in range(_PATH_LOCKS)]

    def _lock(self, path: str) -> threading.Lock:
        return self._locks[hash(os.path.normpath(path)) % _PATH_LOCKS]

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def put(self, path: str, data: bytes) -> bool:
        """Write the checkpoint at ``path`` here; True when it was there already, byte for byte
        (the sending node shares this disk, NFS say: its folder is this one, which it must keep)."""
        with self._lock(path):
            if os.path.isdir(path) and _listing(path) == _archive_listing(data):
                return True
            unpack(data, path)
            return False

    def get(self, path: str) -> bytes | None:
        with self._lock(path):
            return pack(path) if os.path.isdir(path) else None


def start_keeper() -> tuple[Any, str]:
    """A keeper on this (the driver's) node, and the node's id."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(CheckpointKeeper).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
        max_concurrency=4).remote()
    return actor, node
