"""SIGTERM ends a sweep the way Ctrl-C does: trials stop where they are and the sweep stays resumable.

SIGTERM is what ``kill``, ``docker stop``, Kubernetes and Slurm preemption send. Ray's own driver
handler turns it into ``sys.exit(15)``, which a sweep cannot tell from a deliberate exit. While
``tune.run`` runs in the main thread it installs :func:`graceful_sigterm` instead: SIGTERM raises
:class:`SweepTerminated`, the controller records the running trials as interrupted (not
finished), flushes every result it holds, and the exception leaves ``tune.run``. Uncaught, it ends
the process with exit code 143 (128 + SIGTERM), as the signal itself would have, but cleanly.

Inside the controller's loop the signal is only recorded (:func:`deferring`) and raised at the
loop's next pass, at most one wait (0.5 s) later, so it never lands halfway through recording a
decision. A second SIGTERM while the sweep is being saved is ignored; SIGKILL is the way to cut
that short, and a resume copes with it too.

Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` at once, as always, but only once per sweep
(:func:`graceful_sigint`): pressed again while the interrupted sweep is being saved, it is
ignored, so that the saving is not cut halfway. The ``tuner`` command keeps ignoring it until the
process ends (Ray's shutdown at exit included), so that it always ends with its own line.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Any, Iterator

logger = logging.getLogger(__name__)

#: The exit status of a process ended by SIGTERM, which ``SweepTerminated`` keeps.
EXIT_SIGTERM = 128 + signal.SIGTERM


class SweepTerminated(SystemExit):
    """The driver got SIGTERM: the sweep was stopped and left resumable.

    A ``SystemExit`` (code 143) so that a script which does not catch it exits as a terminated
    process does, and ``except Exception`` in user code does not swallow it.
    """

    def __init__(self) -> None:
        super().__init__(EXIT_SIGTERM)

    def __str__(self) -> str:
        return "terminated by SIGTERM; the sweep is saved and resumable"


class _State:
    def __init__(self) -> None:
        self.armed = False  # our handler is installed
        self.fired = False  # SIGTERM arrived (raised once)
        self.defer = 0  # inside the controller's loop: record, raise at the next check
        self.pending = False
        self.restore: Any = None  # the handler to put back


_state = _State()


def _handler(signum: int, frame: Any) -> None:
    if _state.fired:
        logger.warning("SIGTERM again: still saving the sweep (SIGKILL ends it now, and a resume copes)")
        return
    _state.fired = True
    if _state.defer:
        _state.pending = True
        return
    raise SweepTerminated()


def raise_if_terminated() -> None:
    """Raise :class:`SweepTerminated` if SIGTERM arrived while it was deferred."""
    if _state.pending:
        _state.pending = False
        raise SweepTerminated()


@contextlib.contextmanager
def deferring() -> Iterator[None]:
    """While inside, SIGTERM is only recorded; :func:`raise_if_terminated` raises it."""
    _state.defer += 1
    try:
        yield
    finally:
        _state.defer -= 1


def rearm() -> None:
    """Take SIGTERM (and SIGINT) back if something replaced the handler (``ray.init`` installs its
    own for SIGTERM); that replacement is what is put back when the sweep ends, as if the sweep had
    never held the signal."""
    if threading.current_thread() is not threading.main_thread():
        return
    if _sigint.armed and signal.getsignal(signal.SIGINT) is not _sigint_handler:
        signal.signal(signal.SIGINT, _sigint_handler)
    if not _state.armed:
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is not _handler:
        if _state.restore in (signal.SIG_DFL, None):
            _state.restore = current
        signal.signal(signal.SIGTERM, _handler)


class _SigintState:
    def __init__(self) -> None:
        self.armed = False
        self.fired = False  # Ctrl-C arrived (raised once)
        self.warned = False


_sigint = _SigintState()


def _sigint_handler(signum: int, frame: Any) -> None:
    if _sigint.fired:
        if not _sigint.warned:
            _sigint.warned = True
            logger.warning("Ctrl-C again: still saving the sweep (SIGKILL ends it now, and a resume copes)")
        return
    _sigint.fired = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def graceful_sigint(*, ignore_after: bool = False) -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt`` while inside, once; a repeated one is ignored (main
    thread only; nested: the outer one holds it). The handler that was there before is put back
    on the way out, unless Ctrl-C came and ``ignore_after``: then SIGINT stays ignored, for a
    process that ends now (the CLI)."""
    if threading.current_thread() is not threading.main_thread() or _sigint.armed:
        yield
        return
    restore = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, _sigint_handler)
    _sigint.armed, _sigint.fired, _sigint.warned = True, False, False
    try:
        yield
    finally:
        fired = _sigint.fired
        _sigint.armed = False
        if fired and ignore_after:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGINT, restore if restore is not None else signal.default_int_handler)


@contextlib.contextmanager
def graceful_sigterm() -> Iterator[None]:
    """SIGTERM raises :class:`SweepTerminated` while inside (main thread only; nested: the outer
    one holds it). The handler that was there before is put back on the way out."""
    if threading.current_thread() is not threading.main_thread() or _state.armed:
        yield
        return
    _state.restore = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _handler)
    _state.armed, _state.fired, _state.pending = True, False, False
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, _state.restore if _state.restore is not None else signal.SIG_DFL)
        _state.armed, _state.pending, _state.restore = False, False, None
