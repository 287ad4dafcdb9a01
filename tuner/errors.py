"""Errors the tuner raises to users."""


class TuneError(RuntimeError):
    """A sweep could not do what was asked (trials failed, a sweep is missing, ...)."""


class SweepBusyError(TuneError):
    """Another driver is running this sweep: one driver per sweep, wherever the sweep is stored."""


class StorageFullError(TuneError):
    """The disk a trial writes its files to is full (or over quota): not the trial's failure, so
    the sweep stops with its trials resumable instead of failing them one by one."""


#: How an out-of-space error reads in a trial's error text, whatever raised it (the trial's own
#: code, a checkpoint copy, shutil.Error's list of failed copies).
_FULL_DISK = tuple(f"[Errno {code}] {text}" for code, text in (
    (28, "No space left on device"), (122, "Disk quota exceeded")))


def disk_full_line(error_text: str) -> str | None:
    """The out-of-space error in a trial's error text ("OSError: [Errno 28] No space left on
    device: '/path'"), or None when the trial failed for another reason."""
    for line in error_text.splitlines():
        if any(marker in line for marker in _FULL_DISK):
            return line.strip().strip("',\"()[]").strip()
    return None
