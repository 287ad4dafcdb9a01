"""The store's writer thread: it drains a queue of write operations in order and commits everything
it found in one transaction per pass, retrying what a lost connection or a lock interrupted, and
writing a batch piece by piece where a piece cannot be stored. Errors are kept for the caller's next
:meth:`Writer.flush`; a database lost for good (its SQLite file gone) fails every later call."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Union

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .engine import DbLock, FileIdentity
from .errors import StoreError, error_line
from .ops import AddResults, Group, Op
from .latest import HeldLatest
from .plan import LastResults, Step, plan
from .writes import Statements

__all__ = ["Writer"]

logger = logging.getLogger(__name__)

_MAX_BATCH_ROWS = 50_000  # commit at least this often under a flood of results
_RETRIES = (0.05, 0.25, 1.0)  # back-off for operational (connection/lock) errors


class _LostConnectionEcho(logging.Filter):
    """psycopg warns "error ignored terminating <Pipeline>" when a statement's connection is
    lost; in a writer thread that error is already the one the store handles (retried, then
    reported in one line), so the echo is dropped there, and only there."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName or "").startswith("tuner-store-writer") or not str(record.msg).startswith(
            "error ignored terminating")


logging.getLogger("psycopg").addFilter(_LostConnectionEcho())


def _never_free(obj: object) -> None:
    """Keep ``obj`` alive until the process ends, interpreter shutdown included (where module
    globals are cleared): one reference that nothing ever gives back."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


class _Flush:
    """A marker: its event is set once everything queued before it is committed."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class _Stop:
    """The marker that ends the writer thread."""


_STOP = _Stop()
_Item = Union[Op, Group, _Flush, _Stop]


def _weight(item: _Item) -> int:
    """Rows an item writes, roughly (what bounds a batch)."""
    if isinstance(item, AddResults):
        return len(item.rows)
    if isinstance(item, Group):
        return sum(_weight(op) for op in item.ops)
    return 1


class Writer:
    """The writer thread of a store on ``engine``, and the calls that talk to it.

    ``display``: the database as it may be shown (password masked); ``flush_interval_s``: how long
    the thread waits to gather a batch after the first write; ``file``: the SQLite file to check
    at each pass (None for another database).
    """

    def __init__(
        self,
        engine: Engine,
        statements: Statements,
        lock: DbLock,
        *,
        display: str,
        flush_interval_s: float,
        file: FileIdentity | None,
    ) -> None:
        self._engine = engine
        self._statements = statements
        self._lock = lock
        self._display = display
        self._interval = flush_interval_s
        self._file = file
        #: Seconds this thread has spent writing.
        self.write_seconds = 0.0
        #: Set for good once the database is lost; ``_fatal_told``: raised to a caller already.
        self._fatal: str | None = None
        self._fatal_told = False
        self._errors: list[BaseException] = []
        self._errors_lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._grouping: list[Op] | None = None  # ops collected by batch(), on its thread
        self._grouping_thread = 0
        self._stopped = False
        self._conn: Connection | None = None  # the writer thread's own
        self._held = HeldLatest()  # trials' newest results, written at most every INTERVAL_S
        self._abandoned = False
        self.thread = threading.Thread(target=self._main, name=f"tuner-store-writer[{display}]", daemon=True)
        self.thread.start()

    # --------------------------------------------------------------------------- callers' side

    @property
    def failed(self) -> bool:
        """Whether the database takes no more writes (see :meth:`_fail`)."""
        return self._fatal is not None

    def put(self, op: Op, *, quiet: bool = False) -> None:
        """Queue ``op`` (or add it to the current :meth:`batch` of this thread). Once the database
        takes no more writes the first call says so (a StoreError); ``quiet`` ones never do, so
        that a helper thread's write cannot take that news from the sweep's own thread."""
        if self._fatal is not None:
            if not self._fatal_told and not quiet:
                self._raise_fatal()
            return  # the database is gone: there is nowhere to write it
        if self._grouping is not None and threading.get_ident() == self._grouping_thread:
            self._grouping.append(op)
        else:
            self._queue.put(op)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group the ops put inside the block into one transaction (see :meth:`Store.batch`)."""
        if self._grouping is not None:  # nested: the outer block decides
            yield
            return
        self._grouping = []
        self._grouping_thread = threading.get_ident()
        try:
            yield
        finally:
            ops, self._grouping = self._grouping, None
            if ops:
                self._queue.put(Group(tuple(ops)))

    def wait(self, timeout: float | None = None, *, read: bool = True) -> None:
        """Wait for the writer to commit what is queued; a read then raises if the database is
        lost (a flush, once: see :meth:`raise_errors`)."""
        if self._stopped:
            if self.thread.is_alive() and threading.current_thread() is not self.thread:
                self.thread.join(timeout)
            return
        if not self.thread.is_alive():
            raise StoreError(f"tuner store {self._display}: writer thread is not running")
        marker = _Flush()
        self._queue.put(marker)
        if not marker.event.wait(timeout):
            raise StoreError(f"tuner store {self._display}: flush did not complete within {timeout}s")
        if read and self._fatal is not None:
            self._raise_fatal()

    def flush(self, timeout: float | None = None) -> None:
        """Wait for everything queued, then raise what failed since the last flush."""
        self.wait(timeout, read=False)
        self.raise_errors()

    def stop(self, timeout: float | None = None) -> bool:
        """Write what is queued and end the thread; False if it is still running after ``timeout``."""
        self._stopped = True
        self._queue.put(_STOP)
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def raise_errors(self) -> None:
        """Raise one :class:`StoreError` for the writes that failed since the last call (the
        first as its cause), or for the lost database (once)."""
        if self._fatal is not None:  # what failed since is part of it; say it once
            with self._errors_lock:
                self._errors.clear()
            if not self._fatal_told:
                self._raise_fatal()
            return
        if not self._errors:
            return
        with self._errors_lock:
            errors, self._errors = self._errors, []
        if not errors:
            return
        first = errors[0]
        more = f" (and {len(errors) - 1} more failed writes)" if len(errors) > 1 else ""
        raise StoreError(
            f"tuner store {self._display}: background write failed: {type(first).__name__}: "
            f"{error_line(first, self._engine.url)}{more}"
        ) from first

    def _raise_fatal(self) -> None:
        self._fatal_told = True
        raise StoreError(f"tuner store {self._display}: {self._fatal}")

    def _record(self, e: BaseException) -> None:
        logger.error("tuner store %s: background write failed: %s", self._display, error_line(e, self._engine.url))
        with self._errors_lock:
            self._errors.append(e)

    # --------------------------------------------------------------------------- the thread

    def _main(self) -> None:
        stop = False
        while not stop:
            items = self._gather()
            ops = [x for x in items if not isinstance(x, (_Flush, _Stop))]
            urgent = len(ops) < len(items)  # a flush or the stop waits: nothing is held back
            began = time.perf_counter()
            try:
                writing = bool(ops) or bool(self._held)
                if self._file is not None and self._fatal is None:
                    self._check_file(writing=writing)
                if writing and self._fatal is None:
                    self._write(ops, urgent=urgent)
            except BaseException as e:  # noqa: BLE001 - never let the writer die
                self._record(e)
            finally:
                self.write_seconds += time.perf_counter() - began
                for x in items:
                    if isinstance(x, _Stop):
                        stop = True
                    elif isinstance(x, _Flush):
                        x.event.set()
        self._drop_connection()

    def _gather(self) -> list[_Item]:
        """The next batch: the first item and what follows it within the flush interval (all that
        is queued already when a flush or stop is waiting), up to :data:`_MAX_BATCH_ROWS` rows."""
        q = self._queue
        try:  # held newest results fall due while nothing else comes
            item = q.get(timeout=self._held.wait_s(time.monotonic()))
        except queue.Empty:
            return []
        items = [item]
        urgent = isinstance(item, (_Flush, _Stop))
        nrows = _weight(item)
        deadline = None
        while nrows < _MAX_BATCH_ROWS:
            try:
                item = q.get_nowait()
            except queue.Empty:
                if urgent or self._interval <= 0:
                    break
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._interval
                remaining = deadline - now
                if remaining <= 0:
                    break
                try:
                    item = q.get(timeout=remaining)
                except queue.Empty:
                    break
            items.append(item)
            if isinstance(item, (_Flush, _Stop)):
                urgent = True
            else:
                nrows += _weight(item)
        return items

    def _check_file(self, *, writing: bool) -> None:
        """Is the SQLite file still the one opened and, when there is something to write, can it
        be written? If not, nothing written would be stored: the store fails for good, at once
        (see :class:`FileIdentity`). A store that only reads may read a read-only database."""
        assert self._file is not None
        what = self._file.lost()
        if what is not None:
            self._fail(f"the database file {self._file.path} {what} while in use; nothing since could be stored")
            return
        why = self._file.unwritable() if writing else None
        if why is not None:
            self._fail(f"{why}; nothing since could be stored", abandon=True)

    @property
    def abandoned(self) -> bool:
        """Whether the database's connections were left open for good (see :meth:`_fail`)."""
        return self._abandoned

    def _fail(self, why: str, *, abandon: bool = False) -> None:
        """The database takes no more writes: every later call says ``why`` (once), nothing more is
        tried. With ``abandon`` the connections are left open until the process ends: closing the
        last one checkpoints the WAL, which writes into SQLite's mapped shared-memory file, and a
        mapped page of a file that cannot be written any more kills the process with SIGBUS."""
        self._fatal = why
        logger.debug("tuner store %s: %s", self._display, why)
        if abandon:
            self._abandoned = True
            _never_free((self._conn, self._engine))
            if self._file is not None:
                self._file.abandon(why)
            return
        self._drop_connection()
        self._engine.dispose()

    def _connection(self) -> Connection:
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            self._drop_connection()
            conn = self._conn = self._engine.connect()
        return conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _is_transient(self, e: BaseException) -> bool:
        """Connection loss, lock timeouts and the like: worth retrying, unlike constraint errors."""
        if isinstance(e, sa.exc.DBAPIError):
            return isinstance(e, sa.exc.OperationalError) or bool(e.connection_invalidated)
        dbapi = getattr(self._engine.dialect, "dbapi", None)
        op_error = getattr(dbapi, "OperationalError", None)
        return isinstance(op_error, type) and isinstance(e, op_error)

    def _write(self, ops: list[Op | Group], *, urgent: bool = False) -> None:
        steps = plan(ops, on_error=self._record)
        for latest in [s for s in steps if isinstance(s, LastResults)]:  # see .latest
            steps.remove(latest)
            self._held.take(latest)
        due = self._held.due(time.monotonic(), everything=urgent)
        if due is not None:
            steps.append(due)
        if not steps:
            return
        for attempt in range(len(_RETRIES) + 1):
            try:
                self._commit(steps)
                return
            except Exception as e:  # noqa: BLE001 - classified below: transient errors retry, others split the batch
                if not self._is_transient(e):
                    break
                # The connection may be broken: drop it, and retry the batch on a fresh one.
                self._drop_connection()
                if attempt == len(_RETRIES):  # full, read-only, unreachable: it takes no more writes
                    self._fail(f"cannot write to it: {error_line(e, self._engine.url)}; nothing since could be stored",
                               abandon=self._file is not None)
                    return
                logger.debug("tuner store %s: write failed (%s), retrying", self._display,
                             error_line(e, self._engine.url))
                time.sleep(_RETRIES[attempt])
                if self._file is not None:
                    self._check_file(writing=True)
                    if self._fatal is not None:
                        return
        # A permanent error (e.g. a constraint): apply the batch piece by piece so that one bad
        # row costs only its own piece, and report every failure.
        for step in steps:
            for piece in step.pieces():
                try:
                    self._commit([piece])
                except Exception as e:  # noqa: BLE001 - one bad piece is recorded, the others are still written
                    if self._is_transient(e):  # not the piece: the database
                        self._fail(f"cannot write to it: {error_line(e, self._engine.url)}; "
                                   f"nothing since could be stored", abandon=self._file is not None)
                        return
                    self._record(e)

    def _commit(self, steps: list[Step]) -> None:
        """Execute ``steps`` in one transaction."""
        conn = self._connection()
        with self._lock, conn.begin():
            for step in steps:
                self._statements.execute(conn, step)
