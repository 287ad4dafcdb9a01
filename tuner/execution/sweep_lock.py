"""One driver per sweep: a lock file in the run directory, held for the whole run.

The operating system drops the lock when the holder exits, however it exits (SIGKILL too), so
a killed driver never leaves a stale lock behind and a resume can start at once.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from tuner.errors import SweepBusyError

LOCK_FILE = ".driver.lock"


class SweepLock:
    """Held by the driver running a sweep; a second driver on the same sweep gets a SweepBusyError."""

    def __init__(self, run_dir: str | os.PathLike[str], name: str) -> None:
        self._path = Path(run_dir) / LOCK_FILE
        self._name = name
        self._fd: int | None = None

    def acquire(self) -> "SweepLock":
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise SweepBusyError(
                f"sweep {self._name!r} is already being run by another driver (pid {holder}); "
                f"wait for it to end, or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "SweepLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
