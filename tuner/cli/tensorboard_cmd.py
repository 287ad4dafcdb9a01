"""``tuner tensorboard NAME``: TensorBoard on a sweep's logdir, rebuilt from the store if missing."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tuner.cli.errors import CLIError
from tuner.cli.paths import SweepRef, first_line, locate, open_store


def logdir_of(ref: SweepRef) -> Path:
    """Where the sweep's live export went (its stored spec says), else ``<run_dir>/tensorboard``."""
    store = open_store(ref)
    try:
        experiment = store.get_experiment(ref.name)
    finally:
        store.close()
    if experiment is None:
        raise CLIError(f"no sweep named {ref.name!r} in the store {ref.url_for_display}")
    spec = experiment.get("spec") or {}
    stored, stored_run_dir = spec.get("tensorboard_dir"), spec.get("run_dir")
    if not stored:
        return ref.run_dir / "tensorboard"
    if stored_run_dir and Path(stored).is_relative_to(stored_run_dir):
        return ref.run_dir / Path(stored).relative_to(stored_run_dir)  # inside the run dir: moves with it
    return Path(stored)


def ensure_logdir(ref: SweepRef, rebuild: bool = False) -> Path:
    """The sweep's logdir, written from the store first when it is missing (or ``rebuild``)."""
    logdir = logdir_of(ref)
    if rebuild or not logdir.is_dir() or not any(logdir.iterdir()):
        from tuner.tensorboard.rebuild import export_tensorboard

        print(f"rebuilding the TensorBoard logdir {logdir} from the store", file=sys.stderr)
        try:
            export_tensorboard(ref.run_dir, database_url=ref.database_url, logdir=logdir, overwrite=True)
        except (ValueError, OSError) as exc:
            raise CLIError(f"cannot rebuild the TensorBoard logdir: {first_line(exc, ref.url)}", 1) from None
    return logdir


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """Replace this process with ``tensorboard --logdir <logdir> --host <host> --port <port>``."""
    ref = locate(args.name, args.storage_path, args.database_url)
    logdir = ensure_logdir(ref, rebuild=args.rebuild)
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", args.host,
               "--port", str(args.port)]
    print(f"TensorBoard for sweep {ref.name!r}: http://{args.host}:{args.port}/ (logdir {logdir}; Ctrl-C stops it)",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execv(sys.executable, command)
    return 0  # not reached
