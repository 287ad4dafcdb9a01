"""``tuner tensorboard NAME``: TensorBoard on a sweep's logdir, rebuilt from the store if missing."""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from pathlib import Path

from tuner.cli.errors import CLIError
from tuner.cli.paths import SweepRef, first_line, locate, stored_experiment


def logdir_of(ref: SweepRef) -> Path:
    """Where the sweep's live export went (its stored spec says), else ``<run_dir>/tensorboard``."""
    spec = stored_experiment(ref).get("spec") or {}
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


def check_port(host: str, port: int) -> None:
    """A CLIError (exit 2) unless ``port`` can be bound on ``host`` now, as TensorBoard will bind it
    (with SO_REUSEADDR, so a port only lingering in TIME_WAIT is not refused)."""
    if not 0 <= port <= 65535:
        raise CLIError(f"--port must be between 0 and 65535, got {port}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise CLIError(f"--host {host!r} is not an address of this machine ({exc.strerror})") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CLIError(f"port {port} on {host} is in use; pick another with --port") from None
            raise CLIError(f"cannot listen on {host} port {port} ({exc.strerror}); pick another --host "
                           f"or --port") from None


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """Replace this process with ``tensorboard --logdir <logdir> --host <host> --port <port>``,
    once the port is known to be free (TensorBoard itself would print its URL, then fail)."""
    ref = locate(args.name, args.storage_path, args.database_url)
    check_port(args.host, args.port)
    logdir = ensure_logdir(ref, rebuild=args.rebuild)
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", args.host,
               "--port", str(args.port)]
    print(f"TensorBoard for sweep {ref.name!r}: http://{args.host}:{args.port}/ (logdir {logdir}; Ctrl-C stops it)",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execv(sys.executable, command)
    return 0  # not reached
