"""What ``storage_path`` may be: a folder of this machine (local disk or an NFS mount). A URI
(``s3://bucket/x``, ``gs://...``) is refused with one line naming ``storage_path``, never taken as a
local folder named ``s3:``."""

from __future__ import annotations

import os
import re

__all__ = ["check_storage_path"]

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def check_storage_path(value: object, field: str = "storage_path") -> None:
    """A ValueError naming ``field`` when ``value`` is a URI rather than a folder."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    match = _URI.match(text) if isinstance(text, str) else None
    if match:
        raise ValueError(f"{field}: {text!r} is a {match.group(1)}:// URI, but object storage is not "
                         f"supported yet: give a folder (a local disk, or an NFS mount that every node shares)")
