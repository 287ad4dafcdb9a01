"""A checkpoint is a directory on storage that a trial can be restored from: a folder of this
machine, or a folder of the sweep's object storage (its ``path`` is then a URI)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


class Checkpoint:
    """A directory of files that restores a trial (Ray Tune's ``Checkpoint``).

    Example:
        >>> import tempfile
        >>> ckpt = Checkpoint.from_directory(tempfile.mkdtemp())
        >>> with ckpt.as_directory() as d:
        ...     isinstance(d, str)
        True
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from tuner.storage import is_uri

        self.path = path if isinstance(path, str) and is_uri(path) else str(Path(path).expanduser().absolute())

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> "Checkpoint":
        """A checkpoint of the files in ``path`` (which must be a directory)."""
        if not Path(path).is_dir():
            raise ValueError(f"Checkpoint.from_directory: path {str(path)!r} is not a directory")
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (a new temporary directory by default)."""
        from tuner.storage import is_uri
        from tuner.storage.checkpoints import storage_of

        dest = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="checkpoint_"))
        dest.mkdir(parents=True, exist_ok=True)
        if is_uri(self.path):  # in an object store: downloaded
            storage_of(self.path).download(self.path, str(dest))
        else:
            shutil.copytree(self.path, dest, dirs_exist_ok=True)
        return str(dest)

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """Yield a local directory holding the checkpoint's files (the checkpoint's own on local
        storage; a temporary copy, removed afterwards, of one in an object store)."""
        from tuner.storage import is_uri

        if not is_uri(self.path):
            yield self.path
            return
        local = self.to_directory()
        try:
            yield local
        finally:
            shutil.rmtree(local, ignore_errors=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})"


def persist_checkpoint(source: str, trial_dir: str, iteration: int) -> str:
    """Move or copy a reported checkpoint directory to ``trial_dir/checkpoint_<iteration>``.

    A directory the trainable wrote inside the trial directory is renamed; one outside it
    (a temporary directory, say) is copied, so the user's files stay where they were.
    """
    dest = Path(trial_dir) / f"checkpoint_{iteration:06d}"
    src = Path(source).absolute()
    if src == dest.absolute():
        return str(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if Path(trial_dir).absolute() in src.parents:
        os.replace(src, dest)
    else:
        shutil.copytree(src, dest)
    return str(dest)


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "wb") -> Iterator[Any]:
    """A file object whose content replaces ``path`` all at once when the block ends (a file
    beside it, then ``os.replace``): a process killed while it writes leaves the file as it
    was, never cut short. A trial may write the checkpoint of an iteration it already
    checkpointed (a pause after an exploit), over the one the store has on record."""
    directory = os.path.dirname(path) or "."
    fd, partial = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".partial")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.replace(partial, path)  # no fsync: it guards against a process killed, not a machine
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
