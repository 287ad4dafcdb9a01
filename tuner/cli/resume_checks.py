"""What ``tuner resume NAME`` checks before it runs anything: that no driver runs the sweep now
(anywhere: the sweep's lock lives with its database), and that this machine has the spec the
sweep was started with."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from tuner.cli.errors import EXIT_BUSY, EXIT_FAILED, EXIT_USAGE, CLIError
from tuner.cli.paths import (
    SPEC_FILE,
    SweepRef,
    database_flag,
    first_line,
    location_flags,
    read_saved_spec,
    stored_experiment,
)


def _hint(ref: SweepRef, verb: str, run_dir: Path | None = None) -> str:
    """The command that finds sweep ``ref`` in ``run_dir`` (default: its own)."""
    if run_dir is not None and run_dir.name != ref.name:  # only its path names it
        return f"tuner {verb} {shlex.quote(str(run_dir))}" + database_flag(ref.database_url)
    where = SweepRef(ref.name, run_dir, ref.database_url) if run_dir is not None else ref
    return f"tuner {verb} {ref.name}{location_flags(where)}"


def check_not_running(ref: SweepRef) -> None:
    """A CLIError (exit 3) naming the driver (pid and host) that runs sweep ``ref`` right now,
    from this machine or another one sharing its database; nothing is created or written."""
    from tuner.errors import SweepBusyError
    from tuner.execution import sweep_lock
    from tuner.store import StoreError

    try:
        sweep_lock.check_not_running(ref.url, ref.name, ref.run_dir)
    except SweepBusyError as exc:
        raise CLIError(first_line(exc, ref.url), EXIT_BUSY) from None
    except StoreError as exc:
        raise CLIError(first_line(exc, ref.url), EXIT_FAILED) from None
    except ValueError as exc:
        raise CLIError(first_line(exc, ref.url), EXIT_USAGE) from None


def spec_to_resume(ref: SweepRef) -> dict[str, Any]:
    """The spec document sweep ``ref`` was started with, once it is known that the sweep is in
    its store, that no driver runs it now, and that its ``sweep.yaml`` is here (or, for a shared
    database, kept in the store); else a CLIError that says which and what to do."""
    check_not_running(ref)  # a sweep running elsewhere, on a shared database or run directory
    experiment = stored_experiment(ref)  # a sweep not in its store: says so (and why, when it can)
    document = read_saved_spec(ref.run_dir)
    if document is None and ref.database_url is not None:  # a shared store keeps the spec too
        from tuner.cli import stored_spec

        document = stored_spec.load(ref)
    if document is None:
        raise _missing_spec_error(ref, experiment)
    return document


def _missing_spec_error(ref: SweepRef, experiment: dict[str, Any]) -> CLIError:
    """Why sweep ``ref`` cannot be resumed from here without its ``sweep.yaml``: it was started
    elsewhere (its run directory, with the spec and the checkpoints, is another one, perhaps on
    another machine sharing the database), or it was started from Python."""
    recorded = (experiment.get("spec") or {}).get("run_dir")
    started_in = Path(recorded) if isinstance(recorded, str) and recorded else ref.run_dir
    resume = f"`{_hint(ref, 'resume', started_in)}`"
    if (started_in / SPEC_FILE).exists():  # another storage path on this machine
        return CLIError(f"sweep {ref.name!r} in {ref.url_for_display} was started in {started_in}, which holds its "
                        f"{SPEC_FILE} and checkpoints: resume it with {resume}")
    if not started_in.exists():  # another machine sharing the database (or a run directory moved away)
        return CLIError(f"sweep {ref.name!r} in {ref.url_for_display} keeps no spec in its store, and the run "
                        f"directory it was started in, {started_in} (its {SPEC_FILE} and checkpoints), is not on this "
                        f"machine: resume it on the machine that has it, with {resume}")
    return CLIError(f"sweep {ref.name!r} has no {SPEC_FILE} in {started_in}: it was not started by "
                    f"`tuner sweep`; resume it from Python with tune.run(..., name={ref.name!r}, resume=True)")
