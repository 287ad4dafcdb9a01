"""One driver per sweep, wherever the sweep is stored: a lock held for the whole run.

Where the lock lives follows the sweep's database, so that two drivers of one sweep are kept
apart whatever their storage paths:

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) on a key made of the
  schema the store's tables are in and the sweep's name, held on a connection of its own. The
  server lets it go when that connection ends, the driver's exit or death (SIGKILL too) included
  (and also when the server ends an idle session: keep ``idle_session_timeout`` off for drivers).
- A SQLite file: an ``flock`` on a lock file beside the database file, one per sweep name.
- Any other database (and in-memory SQLite): an ``flock`` on ``.driver.lock`` in the run
  directory; two drivers with different storage paths are then not kept apart.

When the database lock does not live in the run directory, the run directory is locked too (it
holds the sweep's checkpoints and TensorBoard logs). The operating system (or the database
server) drops every lock when its holder exits, however it exits, so a killed driver never leaves
a stale lock behind and a resume can start at once. A second driver gets a
:class:`~tuner.errors.SweepBusyError` before it has written anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tuner.errors import SweepBusyError
from tuner.store import StoreError, check_database_url, mask_url
from tuner.store.errors import error_line
from tuner.store.urls import connect_args, sqlite_file

LOCK_FILE = ".driver.lock"


def _holder_text() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _busy(name: str, where: str, holder: str) -> SweepBusyError:
    return SweepBusyError(
        f"sweep {name!r} in {where} is already being run by another driver ({holder}); "
        f"wait for it to end, or stop it first"
    )


class _FileLock:
    """``flock`` on a file; its content says who holds it."""

    def __init__(self, path: Path, name: str, where: str) -> None:
        self.path = path
        self._name = name
        self._where = where
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise _busy(self._name, self._where, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_text().encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> str | None:
        """Who holds the lock now (None: nobody), found without creating or writing anything."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # no driver ever ran the sweep here
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 256, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)  # drops the shared lock, if taken
        return None


class _AdvisoryLock:
    """A PostgreSQL session-level advisory lock on a connection of its own."""

    def __init__(self, url: sa.URL, name: str) -> None:
        self._url = url
        self._name = name
        self._engine: sa.Engine | None = None
        self._conn: sa.Connection | None = None

    def acquire(self) -> None:
        where = mask_url(self._url)
        engine = sa.create_engine(self._url, poolclass=sa.pool.NullPool, connect_args=connect_args(self._url))
        try:
            conn = engine.connect()
        except sa.exc.DBAPIError as exc:
            engine.dispose()
            raise StoreError(f"cannot use the database {where}: {error_line(exc, self._url)}") from None
        try:
            schema = conn.execute(sa.text("SELECT current_schema()")).scalar() or ""
            key = advisory_key(schema, self._name)
            # Who holds it, for the second driver's message (visible in pg_stat_activity).
            conn.execute(sa.text("SELECT set_config('application_name', :n, false)"),
                         {"n": f"tuner driver {_holder_text()}"[:63]})
            got = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
            holder = None if got else _advisory_holder(conn, key)
            conn.commit()  # a session-level lock outlives the transaction; no transaction stays open
        except sa.exc.DBAPIError as exc:
            conn.close()
            engine.dispose()
            raise StoreError(f"cannot use the database {where}: {error_line(exc, self._url)}") from None
        if not got:
            conn.close()
            engine.dispose()
            raise _busy(self._name, where, holder or "unknown")
        self._engine, self._conn = engine, conn

    def keep(self) -> str | None:
        """Check that the lock is still held, and take it again if it went with its session (a
        server restart ends every session, and their locks with them); None while this driver
        holds it, else the line saying which driver took the sweep meanwhile. A server that
        does not answer yet is tried again at the next call."""
        conn = self._conn
        if conn is None:
            return None
        try:
            conn.execute(sa.text("SELECT 1"))
            conn.commit()
            return None
        except (sa.exc.DBAPIError, sa.exc.ResourceClosedError):  # the session died, or its connection was closed here
            pass
        engine, self._conn, self._engine = self._engine, None, None
        with contextlib.suppress(Exception):
            conn.close()
        if engine is not None:
            engine.dispose()
        try:
            self.acquire()
        except SweepBusyError as exc:
            return str(exc)
        except StoreError:
            self._conn = conn  # still down: try again next time (its dead connection fails the check again)
        return None

    def holder(self) -> str | None:
        """Who holds the lock now (None: nobody), read from ``pg_locks`` without taking it."""
        where = mask_url(self._url)
        engine = sa.create_engine(self._url, poolclass=sa.pool.NullPool, connect_args=connect_args(self._url))
        try:
            with engine.connect() as conn:
                schema = conn.execute(sa.text("SELECT current_schema()")).scalar() or ""
                key = advisory_key(schema, self._name)
                held = _advisory_holder(conn, key)
                return None if held is None else (held or "unknown")
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"cannot use the database {where}: {error_line(exc, self._url)}") from None
        finally:
            engine.dispose()

    def release(self) -> None:
        conn, engine, self._conn, self._engine = self._conn, self._engine, None, None
        if conn is not None:
            try:  # closing the connection alone would drop the lock too
                conn.execute(sa.text("SELECT pg_advisory_unlock_all()"))
                conn.commit()
            except (sa.exc.DBAPIError, sa.exc.ResourceClosedError):  # gone with its session: nothing to unlock
                pass
            finally:
                conn.close()
        if engine is not None:
            engine.dispose()


def advisory_key(schema: str, name: str) -> int:
    """The advisory lock key of sweep ``name`` in ``schema``: a signed 64-bit int."""
    digest = hashlib.sha256(f"tuner-sweep\0{schema}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _advisory_holder(conn: sa.Connection, key: int) -> str | None:
    """What the session holding advisory lock ``key`` calls itself (best effort): None when no
    session holds it, "" for one that gave no name (or one whose name this user cannot read)."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    try:
        row = conn.execute(
            sa.text(
                "SELECT a.application_name, host(a.client_addr) FROM pg_locks l "
                "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.classid = CAST(:hi AS oid) AND l.objid = CAST(:lo AS oid) LIMIT 1"
            ),
            {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF},
        ).first()
    except sa.exc.DBAPIError:
        conn.rollback()
        return ""
    if row is None:
        return None
    if not row[0]:
        return ""
    return row[0] + (f" from {row[1]}" if row[1] and row[1] not in ("127.0.0.1", "::1") else "")


class SweepLock:
    """Held by the driver running sweep ``name`` (stored in ``database_url``, run directory
    ``run_dir``); a second driver of the same sweep gets a SweepBusyError. Take it before
    anything of the sweep is read or written.

    A malformed ``database_url`` is a ValueError, a database that cannot be reached a StoreError.
    """

    def __init__(self, database_url: str | sa.URL, name: str, run_dir: str | os.PathLike[str]) -> None:
        url = check_database_url(database_url)
        run_dir = Path(run_dir)
        db_file = sqlite_file(url)
        self._locks: list[Any] = []
        if url.get_backend_name() == "postgresql":
            self._locks.append(_AdvisoryLock(url, name))
        elif db_file is not None:
            self._locks.append(_FileLock(sweep_lock_file(db_file, name), name, str(db_file)))
        if db_file is None or db_file.parent.resolve() != run_dir.resolve():
            self._locks.append(_FileLock(run_dir / LOCK_FILE, name, str(run_dir)))
        self._held: list[Any] = []

    def acquire(self) -> "SweepLock":
        try:
            for lock in self._locks:
                lock.acquire()
                self._held.append(lock)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        while self._held:
            self._held.pop().release()

    def keep(self) -> str | None:
        """Hold on to the sweep: a database lock lost with its session is taken again; the line
        naming the driver that took the sweep meanwhile, or None (see ``_AdvisoryLock.keep``)."""
        for lock in self._held:
            lost = lock.keep() if hasattr(lock, "keep") else None
            if lost is not None:
                return lost
        return None

    def __enter__(self) -> "SweepLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def running_driver(database_url: str | sa.URL, name: str, run_dir: str | os.PathLike[str]) -> str | None:
    """The driver running sweep ``name`` now, as its lock tells it (``pid 4242 on node-3``), or
    None when none runs it. Creates and writes nothing, so any reader of the store may ask.

    A malformed ``database_url`` is a ValueError, a database that cannot be reached a StoreError.
    """
    return _probe(database_url, name, run_dir)[1]


def check_not_running(database_url: str | sa.URL, name: str, run_dir: str | os.PathLike[str]) -> None:
    """The :class:`SweepBusyError` a second driver of sweep ``name`` would get, naming the driver
    that runs it now (``pid 4242 on node-3``), wherever that driver runs; nothing when none does.
    Creates and writes nothing, so any reader of the store may ask (errors as :func:`running_driver`).
    """
    where, holder = _probe(database_url, name, run_dir)
    if holder is not None:
        raise _busy(name, where, holder)


def _probe(database_url: str | sa.URL, name: str, run_dir: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(where the lock of sweep ``name`` lives, who holds it or None)."""
    url = check_database_url(database_url)
    db_file = sqlite_file(url)
    if url.get_backend_name() == "postgresql":
        return mask_url(url), _AdvisoryLock(url, name).holder()
    where = str(db_file) if db_file is not None else str(run_dir)
    path = sweep_lock_file(db_file, name) if db_file is not None else Path(run_dir) / LOCK_FILE
    return where, _FileLock(path, name, where).holder()


def sweep_lock_file(db_file: Path, name: str) -> Path:
    """The lock file of sweep ``name`` in the SQLite database ``db_file``: beside it, one per name."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return db_file.with_name(f"{db_file.name}.{digest}.lock")
