"""The CLI's errors: each becomes one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

#: Exit codes of every verb.
EXIT_OK = 0
EXIT_FAILED = 1  # the sweep ran but trials failed, or a runtime error (Ray, database)
EXIT_USAGE = 2  # a bad spec, flag or name: nothing was run or written
EXIT_BUSY = 3  # another driver is running this sweep: nothing was run or written
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): the sweep was left resumable
EXIT_TERMINATED = 143  # SIGTERM (kill, docker stop, Slurm preemption): the sweep was left resumable


class CLIError(Exception):
    """An error the user can fix, printed as ``tuner: error: <message>`` with ``exit_code``."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class SpecError(CLIError):
    """A sweep spec that is not valid: ``key`` is the dotted path of the offending key."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"spec key '{key}': {message}" if key else f"spec: {message}")
