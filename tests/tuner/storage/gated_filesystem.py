"""Object storage whose uploads wait for an event: a local folder seen through fsspec (so the
sweep treats it as object storage and uploads each checkpoint) whose writes into a chosen
checkpoint wait until a marker file exists, for tests of what a trial does while it uploads.
Ray's workers import it from here to unpickle the filesystem a trial's info carries."""

from __future__ import annotations

import os
import time

from fsspec.implementations.local import LocalFileSystem

#: fsspec rebuilds its filesystems from their class (and instance cache) on import (tests/conftest.py).
SENT_BY_REFERENCE = "Ray's workers import it to unpickle the filesystem"
GIVE_UP_S = 60.0  # a gate that never opens fails the upload (and the test) instead of hanging


class GatedFileSystem(LocalFileSystem):
    """Writes to paths containing ``gated`` wait until the file ``gate`` exists."""

    protocol = "gated"

    def __init__(self, gated: str, gate: str, **kwargs):
        super().__init__(**kwargs)
        self.gated, self.gate = gated, gate

    @classmethod
    def _strip_protocol(cls, path):
        # an object store's paths have no leading slash (bucket/key): they are the machine's, from /
        path = str(path).removeprefix("gated://")
        return super()._strip_protocol(path if path.startswith("/") else "/" + path)

    def open(self, path, mode="rb", *args, **kwargs):
        if "w" in mode and self.gated in str(path):
            waited = 0.0
            while not os.path.exists(self.gate):  # the event is a file another process makes
                if waited > GIVE_UP_S:
                    raise OSError(f"the gate {self.gate} never opened")
                time.sleep(0.01)
                waited += 0.01
        return super().open(path, mode, *args, **kwargs)
