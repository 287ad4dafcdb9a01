"""Where a sweep's files live (a folder, an NFS mount or an object store), and how checkpoints
travel between the nodes of a cluster and that place."""

from .location import Storage, check_storage_path, is_uri, open_storage

__all__ = ["Storage", "check_storage_path", "is_uri", "open_storage"]
