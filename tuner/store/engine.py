"""Opening the store's database: the engine for a URL (SQLite's pragmas, WAL and in-memory
databases; PostgreSQL), the schema gate every store passes before it reads or writes, and the
identity of a SQLite file (so that a file removed or replaced under the store is noticed)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from . import migrate, schema
from .errors import NoSchemaError, StoreError
from .schema import SCHEMA_VERSION
from .urls import connect_args, mask_url, sqlite_file

__all__ = ["DbLock", "FileIdentity", "check_schema", "check_sqlite_file", "open_engine"]

logger = logging.getLogger(__name__)

#: What the users of an engine hold around each use of a connection (see :func:`open_engine`).
DbLock = contextlib.AbstractContextManager[Any]


def open_engine(url: sa.URL, *, create: bool) -> tuple[Engine, DbLock]:
    """The engine of ``url``, and the lock its users hold around each use of a connection: one
    SQLite in-memory database is one connection shared by all threads, so its use is serialized;
    any other database needs none. ``create`` makes a SQLite file's directory and puts the file
    in WAL mode; without it nothing is written to open the database (a tuner database is in WAL
    mode already: the mode is kept in the file)."""
    if url.get_backend_name() != "sqlite":
        engine = sa.create_engine(url, pool_pre_ping=True, connect_args=connect_args(url))
        return engine, contextlib.nullcontext()
    file = sqlite_file(url)
    if file is not None:
        FileIdentity.refuse_abandoned(file)
    db = url.database or ""
    memory = db in ("", ":memory:") or "mode=memory" in db
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30.0}}
    if memory:
        kwargs["poolclass"] = StaticPool
    elif create and not db.startswith("file:"):
        Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, **kwargs)
    event.listen(engine, "connect", _sqlite_pragmas(wal=create and not memory))
    lock: DbLock = threading.RLock() if memory else contextlib.nullcontext()
    return engine, lock


def _sqlite_pragmas(*, wal: bool) -> Callable[[sqlite3.Connection, object], None]:
    """The listener that sets the store's pragmas on each new SQLite connection."""

    def set_pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        cur = dbapi_conn.cursor()
        try:
            if wal:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
        finally:
            cur.close()

    return set_pragmas


def check_sqlite_file(path: Path) -> None:
    """A SQLite file that a reader is about to open: a StoreError when it does not exist, a
    NoSchemaError when it is empty (its data not in a WAL file beside it either), since opening
    it would only make an empty database of it."""
    if not path.is_file():
        raise StoreError(f"no tuner database at {path} (the file does not exist)")
    wal = path.with_name(path.name + "-wal")
    if path.stat().st_size == 0 and not (wal.is_file() and wal.stat().st_size > 0):
        raise NoSchemaError(f"{path} is empty: not a tuner database (was the sweep's start interrupted?)")


# ------------------------------------------------------------------------------------ schema gate


def check_schema(engine: Engine, lock: DbLock, url: sa.URL, *, create: bool, upgrade: bool) -> None:
    """Make the database ready for this version of tuner, or raise :class:`StoreError`: create the
    schema (``create``), migrate an older one (``upgrade``), refuse anything else."""
    for attempt in range(2):  # a second process may be creating the same schema right now
        try:
            with lock, engine.begin() as conn:
                if create and engine.dialect.name == "sqlite":
                    # pysqlite leaves DDL outside its implicit transaction: without this, a
                    # reader of a sweep that is just starting sees some tables but no version.
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                found = _check_or_create_schema(conn, url, create, upgrade)
            if found is None:
                return
        except StoreError:
            raise
        except sa.exc.DBAPIError:
            if attempt:
                raise
            time.sleep(0.2)
            continue
        # An older database and upgrade=True: migrate it (in a transaction of its own), then
        # check again.
        logger.warning("tuner store %s: upgrading schema version %d -> %d", mask_url(url), found, SCHEMA_VERSION)
        migrate.upgrade(url)
        with lock, engine.begin() as conn:
            _check_or_create_schema(conn, url, create, upgrade=False)
        return


def _check_or_create_schema(conn: Connection, url: sa.URL, create: bool, upgrade: bool) -> int | None:
    """Check the schema version, create a new schema; returns the version of an older database
    that ``upgrade`` allows to migrate (None when the database is ready)."""
    names = set(sa.inspect(conn).get_table_names())
    found = migrate.read_schema_version(conn, names)
    shown = mask_url(url)
    if found is None:
        if migrate.holds_data(conn, names):
            raise StoreError(
                f"database {shown} holds tuner tables but no schema version; "
                f"expected schema version {SCHEMA_VERSION}"
            )
        if not create:
            file = sqlite_file(url)
            raise NoSchemaError(f"{file} holds no tuner tables: not a tuner database" if file is not None
                                else f"database {shown} holds no tuner tables: no sweep is stored there")
        migrate.create_newest(conn)
        return None
    if found == SCHEMA_VERSION:
        if create:  # tables lost since (hand-dropped): put them back
            missing = [t for t in schema.metadata.sorted_tables if t.name not in names]
            if missing:
                schema.metadata.create_all(conn, tables=missing)
        return None
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"database {shown} has tuner schema version {found}, but this version of "
            f"tuner expects schema version {SCHEMA_VERSION}: upgrade tuner to open it"
        )
    if upgrade and found in schema.REVISIONS:
        return found
    raise StoreError(
        f"database {shown} has tuner schema version {found}, but this version of "
        f"tuner expects schema version {SCHEMA_VERSION}. To upgrade it: " + migrate.upgrade_hint(url)
    )


# ------------------------------------------------------------------------------ the SQLite file


#: Why each SQLite file (by device and inode) had its connections abandoned by a writer of this
#: process (see ``Writer._fail``). SQLite shares one mapping of a file's shared memory among all
#: the connections a process has to it, so a new connection would take its locks in the protected
#: mapping too: SIGBUS, not an error. Such a file is not opened again by this process while it
#: cannot be written.
_ABANDONED: dict[tuple[int, int], str] = {}


@dataclass(frozen=True)
class FileIdentity:
    """The SQLite file a store opened, as (st_dev, st_ino): a connection writes on into a removed
    file without a word (its inode lives on until closed), and a new one would make an empty
    database, so the writer checks that the file is still the one opened."""

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        st = os.stat(path)
        return cls(path, st.st_dev, st.st_ino)

    def abandon(self, why: str) -> None:
        """Record that this process's connections to the file were left open for good because
        ``why``: no later connection of this process may open it (see :meth:`refuse_abandoned`)."""
        _ABANDONED[(self.device, self.inode)] = why

    @staticmethod
    def refuse_abandoned(path: Path) -> None:
        """A StoreError saying why, when a writer of this process abandoned the file at ``path``
        and it still cannot be written (once it can, the shared mapping takes writes again)."""
        try:
            st = os.stat(path)
        except OSError:
            return
        why = _ABANDONED.get((st.st_dev, st.st_ino))
        if why is not None and FileIdentity(path, st.st_dev, st.st_ino).unwritable() is not None:
            raise StoreError(f"the database {path} failed in this process ({why}); open it from another "
                             f"process (a new Python session, or `tuner show`)")

    def lost(self) -> str | None:
        """What became of the file ("was removed", ...), or None while it is the one opened."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "was removed"
        if (st.st_dev, st.st_ino) == (self.device, self.inode):
            return None
        return "was replaced by another file"

    def unwritable(self) -> str | None:
        """Why the database (its file, journal, WAL or shared-memory file, or their folder) can
        no longer be written, or None. Asked before each write: SQLite maps the shared-memory
        file, and a write into a mapped page of a file made immutable kills the process with
        SIGBUS instead of an error. ``access`` sees immutable files and read-only mounts even
        for root."""
        for path in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm", "-journal"))):
            if not os.access(path, os.W_OK) and os.path.lexists(path):
                return f"cannot write {path}: {_why_unwritable(path)}"
        if not os.access(self.path.parent, os.W_OK | os.X_OK):
            return f"cannot write in {self.path.parent}: {_why_unwritable(self.path.parent)}"
        return None


def _why_unwritable(path: Path) -> str:
    """The reason a path cannot be written, in the words a user would check it by."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "the file system is read-only"
        if path.is_file():
            with open(path, "ab"):
                pass
    except OSError as exc:
        if exc.errno == errno.EPERM:
            return "it is immutable (chattr +i) or otherwise protected: Operation not permitted"
        return exc.strerror or type(exc).__name__
    return "permission denied"
