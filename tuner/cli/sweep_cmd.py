"""``tuner sweep SPEC.yaml`` and ``tuner resume NAME``: run a sweep through ``tune.run``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from schedulers.trial_status import TrialStatus
from tuner.callback import Callback
from tuner.cli import spec as spec_mod
from tuner.cli.errors import EXIT_BUSY, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, CLIError
from tuner.cli.interrupt import discard_unstarted, mark_interrupted
from tuner.cli.live import fmt, make_progress
from tuner.cli.paths import (
    DB_FILE,
    SweepRef,
    first_line,
    has_password,
    locate,
    location_flags,
    remember_location,
)
from tuner.cli.yaml_io import dump
from tuner.display import short_repr
from tuner.execution.signals import SweepTerminated, graceful_sigint, graceful_sigterm
from tuner.flatten import flat_result
from tuner.run_options import RunOptions
from tuner.storage.location import is_uri


class SaveSpec(Callback):
    """Writes the spec into the run directory once the sweep exists in the store (``tuner resume``
    reads it back). A database password is never written: resume then needs ``--database-url``."""

    def __init__(self, path: Path, document: dict[str, Any], url: str | None = None) -> None:
        self.path = path
        self.document = document
        self.url = url

    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        if self.path.exists():
            return
        from tuner.store import mask_url

        document = dict(self.document)
        if has_password(document.get("database_url")):
            document["database_url"] = mask_url(document["database_url"])
        if self.url is not None and info.get("experiment_id") is not None:  # for a resume from another machine
            from tuner.cli import stored_spec

            stored_spec.save(self.url, int(info["experiment_id"]), self.document)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        text = "# written by `tuner sweep`; `tuner resume` reads it\n" + dump(document)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(self.path)
        _copy_to_object_storage(document, self.path.parent.name, self.path.name, text)


def _copy_to_object_storage(document: dict[str, Any], name: str, filename: str, text: str) -> None:
    """The spec beside the sweep's checkpoints too, when they are in object storage."""
    from tuner.storage import is_uri, open_storage

    storage_path = document.get("storage_path")
    if not is_uri(storage_path):
        return
    try:
        storage = open_storage(str(storage_path))
        storage.write_text(storage.join(name, filename), text)
    except (OSError, ValueError) as exc:
        print(f"tuner: could not copy the spec to {storage_path}: {first_line(exc)}", file=sys.stderr)


def _command_hint(ref: SweepRef, verb: str = "resume", address: str | None = None) -> str:
    """A command that finds this sweep as printed, wherever it is stored; a resume runs where this
    sweep ran: on the Ray cluster at ``address``, or as a Ray Job again when this driver is one."""
    from tuner.api import JOB_ID_ENV

    line = f"tuner {verb} {ref.name}{location_flags(ref)}"
    if verb == "resume" and os.environ.get(JOB_ID_ENV):
        line += " --submit"  # the job's address is in the store
    elif verb == "resume" and address:
        line += f" --address {shlex.quote(address)}"
    return line


def _summary(analysis: Any, spec: spec_mod.SweepSpec, ref: SweepRef, address: str | None) -> int:
    trials = analysis.trials
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.status] = counts.get(trial.status, 0) + 1
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"sweep {ref.name}: {len(trials)} trials ({text})")
    if spec.metric:
        best = analysis.get_best_trial(spec.metric, spec.mode)
        if best is not None:
            print(f"best {spec.metric}={fmt(flat_result(best.last_result or {}).get(spec.metric))} ({best.trial_id})")
            print(f"best config: {short_repr(best.config)}")
    print(f"stored in {ref.url_for_display}; `{_command_hint(ref, 'show')}` for details")
    silent = [t.trial_id for t in trials if t.status == TrialStatus.TERMINATED and not t.last_result]
    if silent:
        names = ", ".join(silent[:5]) + (" ..." if len(silent) > 5 else "")
        print(f"{len(silent)} trial(s) reported no result: {names} (a function trainable must call tune.report)")
    cut = analysis.budget_cut
    if cut is not None:
        print(cut.line(f"`{_command_hint(ref, address=address)}`"))
    failed = [t for t in trials if t.status == TrialStatus.ERROR]
    if failed:
        names = ", ".join(t.trial_id for t in failed[:5]) + (" ..." if len(failed) > 5 else "")
        print(f"tuner: {len(failed)} trial(s) failed: {names}; `{_command_hint(ref, 'show')}` shows their errors",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _failed(ref: SweepRef, args: argparse.Namespace) -> int:
    """The exit code (or CLIError) for the exception ``tune.run`` raised, being handled now."""
    from sqlalchemy.exc import SQLAlchemyError

    from tuner.errors import StorageFullError, SweepBusyError, TuneError
    from tuner.ray_session import RayUnreachableError
    from tuner.store import StoreError

    exc = sys.exc_info()[1]
    if isinstance(exc, (KeyboardInterrupt, SweepTerminated)):
        what = "terminated (SIGTERM)" if isinstance(exc, SweepTerminated) else "interrupted"
        if mark_interrupted(ref.url, ref.name):
            print(f"tuner: {what}; sweep {ref.name!r} is saved and resumable: {_command_hint(ref, address=args.address)}",
                  file=sys.stderr)
        else:
            print(f"tuner: {what} before sweep {ref.name!r} started; nothing was run", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, SweepTerminated) else EXIT_INTERRUPTED
    if isinstance(exc, ValueError):  # tune.run's own argument checks (e.g. resources that never fit)
        raise CLIError(first_line(exc, ref.url)) from None
    if isinstance(exc, SweepBusyError):
        raise CLIError(first_line(exc, ref.url), EXIT_BUSY) from None
    if isinstance(exc, RayUnreachableError):  # its message names the address already
        raise CLIError(first_line(exc), EXIT_FAILED) from None
    if isinstance(exc, StorageFullError):  # its trials were cut short, not failed
        raise CLIError(f"{first_line(exc, ref.url)}; `{_command_hint(ref, address=args.address)}` continues it once "
                       f"there is space", EXIT_FAILED) from None
    if isinstance(exc, StoreError) and ref.spec_file.exists():  # it ran: what is stored so far resumes
        raise CLIError(f"{first_line(exc, ref.url)}; `{_command_hint(ref, address=args.address)}` continues the "
                       f"sweep once the store can be written", EXIT_FAILED) from None
    if isinstance(exc, (TuneError, StoreError)):
        raise CLIError(first_line(exc, ref.url), EXIT_FAILED) from None
    if isinstance(exc, SQLAlchemyError):  # the database cannot be reached or used
        raise CLIError(f"cannot use the database {ref.url_for_display}: {first_line(exc, ref.url)}",
                       EXIT_FAILED) from None
    if type(exc).__name__ == "AuthenticationError" and type(exc).__module__ == "ray.exceptions":
        from tuner.cluster.auth import missing_token_hint

        where = f" at {args.address!r}" if args.address else ""
        raise CLIError(f"cannot join Ray{where}: {missing_token_hint()}", EXIT_FAILED) from None
    if isinstance(exc, ConnectionError):
        where = f" at {args.address!r}" if args.address else ""
        from tuner.cluster.auth import token_source

        # The cluster answered (the address was probed first) and refused: Ray says no more than this.
        hint = ("; if the cluster uses token authentication (Ray 2.60's default), copy the head node's "
                "~/.ray/auth_token here (or set RAY_AUTH_TOKEN)") if args.address and token_source() is None else ""
        raise CLIError(f"cannot start or join Ray{where}: {first_line(exc)}{hint}", EXIT_FAILED) from None
    if isinstance(exc, OSError):  # e.g. a storage path that cannot be written
        raise CLIError(f"{type(exc).__name__}: {first_line(exc, ref.url)}", EXIT_FAILED) from None
    raise  # noqa: PLE0704 - called from an except block; a bug: its traceback is worth seeing


def run_spec(spec: spec_mod.SweepSpec, ref: SweepRef, args: argparse.Namespace, resume: bool | str) -> int:
    """Run (or resume) ``spec`` with the live progress; the exit code (143 after SIGTERM, as
    during the sweep, also while its summary is printed; 130 after Ctrl-C, which is ignored
    from then on: pressed again, it would cut the saving, or Ray's shutdown at exit, short)."""
    with graceful_sigterm(), graceful_sigint(ignore_after=True):
        return _run_spec(spec, ref, args, resume)


def _run_spec(spec: spec_mod.SweepSpec, ref: SweepRef, args: argparse.Namespace, resume: bool | str) -> int:
    from tuner.api import run_sweep

    if args.address:  # tune.run joins $RAY_ADDRESS (after it has opened the store)
        os.environ["RAY_ADDRESS"] = args.address
    progress = make_progress(args.progress, ref.name, spec.metric, spec.mode, list(spec.searched))
    callbacks = [cb for cb in (progress, SaveSpec(ref.spec_file, spec.document, ref.url)) if cb is not None]
    created = ref.database_url is None and not ref.run_dir.exists()
    try:
        options = RunOptions(**spec.run_kwargs(), verbose=0, raise_on_failed_trial=False, resume=resume,
                             callbacks=callbacks)
        analysis = run_sweep(spec.trainable, options)
    except BaseException:  # noqa: BLE001 - interrupts included: the partial sweep is discarded, then re-raised
        if progress is not None:
            progress.close()
        if created:  # failed or interrupted before the sweep was in the store: leave nothing behind
            discard_unstarted(ref.run_dir, ref.url, ref.name)
        return _failed(ref, args)
    finally:
        if progress is not None:
            progress.close()
    try:
        return _summary(analysis, spec, ref, args.address)
    finally:
        analysis.close()


def cmd_sweep(args: argparse.Namespace) -> int:
    """``tuner sweep SPEC.yaml``: validate the whole spec, then run it."""
    spec = spec_mod.load(args.spec, args.set or (), name=args.name, database_url=args.database_url,
                         storage_path=args.storage_path)
    ref = SweepRef(spec.name, spec.run_dir, spec.database_url)
    taken = ref.spec_file.exists() or (ref.database_url is None and (ref.run_dir / DB_FILE).exists())
    if taken and not _submitted_as_this_job(ref):
        from tuner.cli.resume_checks import check_not_running

        check_not_running(ref)  # a sweep that runs now: exit 3, naming its driver
        raise CLIError(f"a sweep named {ref.name!r} already exists in {ref.run_dir.parent}; "
                       f"`{_command_hint(ref, address=args.address)}` continues it, or pick another --name")
    remember_location(ref)
    return run_spec(spec, ref, args, resume=False)


def _submitted_as_this_job(ref: SweepRef) -> bool:
    """Whether this driver is the Ray Job that `tuner submit` recorded sweep ``ref`` for (its
    SQLite file then exists before the driver starts)."""
    from tuner.api import JOB_ID_ENV, submitted_as_this_job
    from tuner.store import Store, StoreError

    if not os.environ.get(JOB_ID_ENV) or ref.spec_file.exists():
        return False
    try:
        with Store(ref.url, create=False) as store:
            experiment = store.get_experiment(ref.name)
    except StoreError:
        return False
    return experiment is not None and submitted_as_this_job(experiment)


def cmd_resume(args: argparse.Namespace) -> int:
    """``tuner resume NAME``: continue a sweep started by ``tuner sweep`` from its store (with
    ``--submit``, as a Ray Job on the cluster at ``--address``)."""
    if getattr(args, "submit", False):
        from tuner.cli.submit_cmd import submit_resume

        return submit_resume(args)
    from tuner.cli.resume_checks import spec_to_resume

    ref = locate(args.name, args.storage_path, args.database_url)
    document = spec_to_resume(ref)  # not running elsewhere, in its store, its spec here or in its store
    document.update(name=ref.name, database_url=ref.database_url)
    if not is_uri(document.get("storage_path")):  # an object store's URI stays: the checkpoints are there
        document["storage_path"] = str(ref.run_dir.parent)
    spec = spec_mod.validate(document)
    return run_spec(spec, ref, args, resume="ERRORED_ONLY" if args.errored_only else True)
