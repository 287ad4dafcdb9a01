"""Where a sweep's files live: a folder of this machine (local disk, NFS) or a folder of an object
store (``s3://bucket/prefix``, ``gs://...``, any pyarrow or fsspec filesystem), as Ray Tune's
``storage_path`` and ``storage_filesystem``.

:class:`Storage` is plain, picklable data: the driver makes it once and hands it to every trial,
whose actor writes its checkpoints straight there from whichever node it runs on, and reads them
back from there (a restore, a PBT exploit, a restart elsewhere). No S3 client of our own: pyarrow's
filesystems (Ray brings pyarrow), or an fsspec filesystem behind pyarrow's ``FSSpecHandler``.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Storage", "is_uri", "open_storage", "check_storage_path"]

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
#: Schemes pyarrow opens itself; any other goes through fsspec, when fsspec knows it.
_PYARROW_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "file")
#: Seconds to wait for an object store to answer (pyarrow's defaults wait minutes on a dead endpoint).
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 60.0


def is_uri(path: object) -> bool:
    """Whether ``path`` is a URI (``scheme://...``) rather than a folder of this machine."""
    return isinstance(path, str) and _URI.match(path) is not None


def _scheme(uri: str) -> str:
    match = _URI.match(uri)
    assert match is not None
    return match.group(1).lower()


def check_storage_path(value: object, field: str = "storage_path", filesystem: Any = None) -> None:
    """A ValueError naming ``field`` when ``value`` is a URI of a scheme no filesystem here opens
    (nothing is contacted: see :meth:`Storage.check` for that)."""
    if filesystem is not None or not is_uri(value):
        return
    assert isinstance(value, str)
    scheme = _scheme(value)
    if scheme in _PYARROW_SCHEMES or _fsspec_knows(scheme):
        return
    raise ValueError(f"{field}: {value!r} is a {scheme}:// URI, which no filesystem here opens; expected a folder, "
                     f"s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, hdfs://..., or a scheme of an installed fsspec "
                     f"filesystem (or pass storage_filesystem=)")


def _fsspec_knows(scheme: str) -> bool:
    try:
        import fsspec
    except ImportError:
        return False
    try:
        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError):
        return False
    return True


@dataclasses.dataclass(frozen=True)
class Storage:
    """The folder a sweep's checkpoints (and spec copy) go to. ``root`` is what the user gave:
    an absolute local path, or a URI; ``filesystem`` is the pyarrow filesystem of a URI (None for
    a local folder) and ``fs_root`` the root's path inside it."""

    root: str
    filesystem: Any = dataclasses.field(default=None, compare=False)
    fs_root: str = ""

    @property
    def is_local(self) -> bool:
        return self.filesystem is None

    def join(self, *parts: str) -> str:
        """The path (local) or URI (object store) of ``parts`` under the root."""
        if self.is_local:
            return os.path.join(self.root, *parts)
        return self.root.rstrip("/") + "/" + "/".join(p.strip("/") for p in parts)

    def owns(self, path: str) -> bool:
        """Whether ``path`` is under this storage's root (a URI of it, or a folder in it)."""
        if self.is_local:
            return not is_uri(path) and Path(self.root).absolute() in Path(path).absolute().parents
        return path.startswith(self.root.rstrip("/") + "/")

    def fs_path(self, uri: str) -> str:
        """The path inside ``filesystem`` of ``uri`` (a URI under the root)."""
        if not self.owns(uri):
            raise ValueError(f"{uri!r} is not under the sweep's storage {self.root!r}")
        return posixpath.join(self.fs_root, uri[len(self.root.rstrip("/")) + 1:])

    # -- moving folders ---------------------------------------------------------------------------
    def upload(self, local_dir: str, uri: str) -> None:
        """Copy the folder ``local_dir`` to ``uri`` (replacing what was there)."""
        import pyarrow.fs as pafs

        dest = self.fs_path(uri)
        if self.filesystem.type_name != "s3":  # an object store has no folders to make first
            self.filesystem.create_dir(dest, recursive=True)
        pafs.copy_files(local_dir, dest, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.filesystem)

    def download(self, uri: str, local_dir: str) -> None:
        """Copy the folder at ``uri`` to ``local_dir`` (made); FileNotFoundError when it is not there."""
        import pyarrow.fs as pafs

        source = self.fs_path(uri)
        if not self._holds_files(source):
            raise FileNotFoundError(f"no checkpoint at {uri}")
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        pafs.copy_files(source, local_dir, source_filesystem=self.filesystem, destination_filesystem=pafs.LocalFileSystem())

    def delete(self, uri: str) -> None:
        """Remove the folder at ``uri`` (nothing when it is gone already)."""
        import pyarrow.fs as pafs

        path = self.fs_path(uri)
        if self.filesystem.get_file_info(path).type != pafs.FileType.NotFound:
            self.filesystem.delete_dir(path)

    def exists(self, uri: str) -> bool:
        """Whether a folder holding files (or a file) is at ``uri``: an object store may keep an
        empty folder's marker after its files were deleted."""
        return self._holds_files(self.fs_path(uri))

    def _holds_files(self, path: str) -> bool:
        import pyarrow.fs as pafs

        info = self.filesystem.get_file_info(path)
        if info.type == pafs.FileType.File:
            return True
        if info.type != pafs.FileType.Directory:
            return False
        listed = self.filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
        return any(entry.type == pafs.FileType.File for entry in listed)

    def write_text(self, uri: str, text: str) -> None:
        """Write ``text`` to the file at ``uri``."""
        path = self.fs_path(uri)
        self.filesystem.create_dir(posixpath.dirname(path), recursive=True)
        with self.filesystem.open_output_stream(path) as out:
            out.write(text.encode("utf-8"))

    # -- the check before a sweep writes anything ---------------------------------------------------
    def check(self, field: str = "storage_path") -> None:
        """A ValueError naming ``field`` when the object store cannot be used: its endpoint does
        not answer, the bucket does not exist, the credentials are refused. Writes nothing."""
        if self.is_local:
            return
        import pyarrow.fs as pafs

        bucket = self.fs_root.split("/", 1)[0]
        try:
            top = self.filesystem.get_file_info(bucket)
            if top.type == pafs.FileType.NotFound:
                raise ValueError(f"{field}: {self.root!r}: the bucket {bucket!r} does not exist (create it first)")
            self.filesystem.get_file_info(pafs.FileSelector(self.fs_root, allow_not_found=True, recursive=False))
        except OSError as exc:
            raise ValueError(f"{field}: {self.root!r} cannot be used: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def open_storage(storage_path: str | os.PathLike[str], filesystem: Any = None, field: str = "storage_path") -> Storage:
    """The :class:`Storage` of ``storage_path`` (a folder or a URI), through ``filesystem`` when
    given (a pyarrow.fs.FileSystem or an fsspec filesystem; ``storage_path`` is then a path in
    it). A scheme no filesystem here opens is a ValueError naming ``field``; nothing is contacted."""
    text = os.fspath(storage_path)
    if not isinstance(text, str):
        raise ValueError(f"{field} must be a str path or URI, got {storage_path!r}")
    if filesystem is not None:
        fs = _as_pyarrow(filesystem, field)
        fs_root = text.split("://", 1)[1] if is_uri(text) else text
        root = text if is_uri(text) else f"{_fs_name(fs)}://{fs_root.lstrip('/')}"
        return Storage(root=root, filesystem=fs, fs_root=fs_root.strip("/"))
    if not is_uri(text):
        return Storage(root=str(Path(text).expanduser().absolute()))
    check_storage_path(text, field)
    scheme = _scheme(text)
    if scheme == "file":
        return Storage(root=str(Path(urlsplit(text).path).absolute()))
    if scheme == "s3":
        fs = _s3()
        fs_root = text.split("://", 1)[1]
    elif scheme in _PYARROW_SCHEMES:
        import pyarrow.fs as pafs

        try:
            fs, fs_root = pafs.FileSystem.from_uri(text)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{field}: {text!r} cannot be opened: {_first_line(exc)}") from None
    else:
        import fsspec

        fs = _as_pyarrow(fsspec.filesystem(scheme), field)
        fs_root = text.split("://", 1)[1]
    return Storage(root=text.rstrip("/"), filesystem=fs, fs_root=fs_root.strip("/"))


def _s3() -> Any:
    """pyarrow's S3 filesystem, at ``$AWS_ENDPOINT_URL_S3`` / ``$AWS_ENDPOINT_URL`` when set (an
    S3-compatible server), with timeouts that give up on a dead endpoint in seconds. Credentials
    set in this process's environment travel with it (the filesystem is pickled to the trials'
    nodes, which may not have them); otherwise each node takes its own (AWS's usual chain)."""
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "request_timeout": REQUEST_TIMEOUT_S,
                              "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3)}
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        kwargs.update(access_key=key, secret_key=secret, session_token=os.environ.get("AWS_SESSION_TOKEN"))
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https")
        kwargs.setdefault("region", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    return pafs.S3FileSystem(**kwargs)


def _as_pyarrow(filesystem: Any, field: str) -> Any:
    import pyarrow.fs as pafs

    if isinstance(filesystem, pafs.FileSystem):
        return filesystem
    if type(filesystem).__module__.startswith("fsspec") or hasattr(filesystem, "protocol"):
        return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    raise ValueError(f"storage_filesystem: expected a pyarrow.fs.FileSystem or an fsspec filesystem, got "
                     f"{type(filesystem).__name__} (for {field})")


def _fs_name(fs: Any) -> str:
    name = getattr(fs, "type_name", "") or "fs"
    return {"local": "file", "py::fsspec+file": "file"}.get(name, name.split("::")[-1].replace("+", "-"))
