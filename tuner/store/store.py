"""SQL store of experiments, trials, results and scheduler/searcher state.

Writes go through one background thread that drains a queue in order and commits everything it found
in one transaction per pass, so the controller's hot path (:meth:`Store.add_results`) costs one
``queue.put``. Reads flush first, so a reader in the same process sees its own writes.

Objects handed to the write methods (result dicts, configs) belong to the store from then on: they
are encoded later, on the writer thread, so the caller must not mutate them afterwards.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import functools
import logging
import math
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from ..best_rule import number_at, pick_best
from . import codec, migrate, schema
from .errors import NoSchemaError, StoreError, error_line
from .schema import (
    SCHEMA_VERSION,
    checkpoints,
    experiment_state,
    experiments,
    exploits,
    results,
    trial_profiles,
    trials,
)
from .urls import check_database_url, connect_args, default_database_url, mask_url, sqlite_file

__all__ = ["Store", "StoreError", "default_database_url", "mask_url"]

logger = logging.getLogger(__name__)

_Method = TypeVar("_Method", bound=Callable[..., Any])


# ------------------------------------------------------------------------------ queue item helpers

# Operation codes (first element of the tuples put on the queue).
_ADD_TRIAL = 1
_UPDATE_TRIAL = 2
_RESULTS = 3
_STATE = 4
_EXP_STATUS = 5
_EXPLOIT = 6
_GROUP = 7  # (_GROUP, [ops]): written in one transaction
_CHECKPOINT = 8
_PROFILE = 9
#: The figures of a trial profile row (trial_profiles' columns but its keys).
_PROFILE_COLS = tuple(c.name for c in trial_profiles.columns if c.name not in ("experiment_id", "trial_id"))

_TRIAL_FIELDS = frozenset(
    {"status", "error", "num_failures", "checkpoint_path", "last_result", "config", "config_blob", "trial_dir"}
)
_CHECKPOINT_COLS = ("experiment_id", "trial_id", "path", "iteration", "timestamp", "metrics", "deleted", "deleted_at")

_RESULT_COLS = ("experiment_id", "trial_id", "iteration", "timestamp", "data")
_MAX_BATCH_ROWS = 50_000  # commit at least this often under a flood of results
_RETRIES = (0.05, 0.25, 1.0)  # back-off for operational (connection/lock) errors


def _answering(method: _Method) -> _Method:
    """A synchronous call of the store: a database error comes out as one StoreError line
    (a corrupt file, a lost connection), the driver's exception as its cause."""

    @functools.wraps(method)
    def call(self: "Store", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sa.exc.DBAPIError as exc:
            raise StoreError(self._describe(exc)) from exc

    return call  # type: ignore[return-value]


class _Flush:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


_STOP = object()

_LIVE: "weakref.WeakSet[Store]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # pragma: no cover - exercised at interpreter exit
    for store in list(_LIVE):
        try:
            store.close()
        except Exception as e:  # noqa: BLE001 - at exit: report every store that fails to close, close the others
            logger.error("tuner store %s: %s", store.url_for_display, e)


# --------------------------------------------------------------------------------------------- Store


class Store:
    """SQL store of a tuner service (SQLite by default, any SQLAlchemy URL, PostgreSQL tested).

    Args:
        url: SQLAlchemy database URL, e.g. :func:`default_database_url` or
            ``postgresql+psycopg://user:pw@host/db``.
        flush_interval_s: the writer waits at most this long to gather a batch after the first write.
        create: create missing tables (and stamp the schema version). With ``False`` a database
            without the tuner schema is an error, and so is a SQLite file that does not exist
            (none is made).
        upgrade: migrate a database of an older schema version in place (see
            :func:`tuner.store.upgrade`; back it up first). Without it such a database is a
            :class:`StoreError` that says how to upgrade.

    A malformed URL, or one of a database whose driver is not installed, is a ValueError; a
    database that cannot be reached or read (or a file that is no SQLite database) is a
    :class:`StoreError` of one line. A SQLite file removed or replaced while the store is open
    is found at the writer's next pass: the next call raises a :class:`StoreError` that says so
    (later writes are dropped: there is nowhere to put them; reads raise it again).
    """

    def __init__(
        self,
        url: str | sa.URL,
        *,
        flush_interval_s: float = 0.02,
        create: bool = True,
        upgrade: bool = False,
    ):
        self._url = check_database_url(url)
        self.url_for_display = mask_url(self._url)
        self._file = sqlite_file(self._url)
        if self._file is not None and not create and not self._file.is_file():
            raise StoreError(f"no tuner database at {self._file} (the file does not exist)")
        #: (st_dev, st_ino) of the SQLite file when it was opened: the writer checks it is still there.
        self._file_id: tuple[int, int] | None = None
        #: Set for good once the database is lost; ``_fatal_told``: raised to a caller already.
        self._fatal: str | None = None
        self._fatal_told = False
        self._flush_interval = max(0.0, float(flush_interval_s))
        #: Seconds the writer thread has spent writing (a sweep's profile reports it).
        self.write_seconds = 0.0
        self._closed = False
        self._close_lock = threading.Lock()
        self._errors: list[BaseException] = []
        self._errors_lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._grouping: list[tuple] | None = None  # ops collected by batch(), on its thread
        self._grouping_thread = 0

        self._engine, memory = self._make_engine(self._url, create)
        # One sqlite in-memory database is one connection shared by all threads: serialize its use.
        self._db_lock: Any = threading.RLock() if memory else contextlib.nullcontext()
        self._dialect = self._engine.dialect.name
        self._build_statements()
        try:
            self._init_schema(create, upgrade)
            if self._file is not None:
                st = os.stat(self._file)
                self._file_id = (st.st_dev, st.st_ino)
        except sa.exc.DBAPIError as exc:
            self._engine.dispose()
            raise StoreError(self._describe(exc)) from None
        except BaseException:
            self._engine.dispose()
            raise

        self._thread = threading.Thread(
            target=self._writer_main, name=f"tuner-store-writer[{self.url_for_display}]", daemon=True
        )
        self._thread.start()
        _LIVE.add(self)

    # ------------------------------------------------------------------------------- setting up

    @staticmethod
    def _make_engine(url: sa.URL, create: bool) -> tuple[Engine, bool]:
        if url.get_backend_name() == "sqlite":
            db = url.database or ""
            memory = db in ("", ":memory:") or "mode=memory" in db
            kwargs: dict[str, Any] = {
                "connect_args": {"check_same_thread": False, "timeout": 30.0},
            }
            if memory:
                kwargs["poolclass"] = StaticPool
            elif create and not db.startswith("file:"):
                Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
            engine = sa.create_engine(url, **kwargs)

            @event.listens_for(engine, "connect")
            def _sqlite_pragmas(dbapi_conn, _record):  # noqa: ANN001
                cur = dbapi_conn.cursor()
                try:
                    if not memory:
                        cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA synchronous=NORMAL")
                    cur.execute("PRAGMA busy_timeout=30000")
                    cur.execute("PRAGMA foreign_keys=ON")
                finally:
                    cur.close()

            return engine, memory
        return sa.create_engine(url, pool_pre_ping=True, connect_args=connect_args(url)), False

    def _describe(self, exc: BaseException) -> str:
        """One line for a database error: what could not be done, and the driver's first line."""
        orig = getattr(exc, "orig", None) or exc
        text = error_line(exc, self._url)
        if self._file is not None and isinstance(orig, sqlite3.DatabaseError) and not isinstance(
            orig, sqlite3.OperationalError
        ):
            return f"{self._file} is not a tuner database, or it is corrupt ({text})"
        return f"cannot use the database {self.url_for_display}: {text}"

    def _build_statements(self) -> None:
        d = self._dialect
        if d in ("sqlite", "postgresql"):
            if d == "sqlite":
                from sqlalchemy.dialects.sqlite import insert as dialect_insert
            else:
                from sqlalchemy.dialects.postgresql import insert as dialect_insert
            ins = dialect_insert(trials)
            self._upsert_trial = ins.on_conflict_do_update(
                index_elements=[trials.c.trial_id],
                set_={
                    "trial_index": ins.excluded.trial_index,
                    "config": ins.excluded.config,
                    "config_blob": sa.func.coalesce(ins.excluded.config_blob, trials.c.config_blob),
                    "status": ins.excluded.status,
                    "updated_at": ins.excluded.updated_at,
                },
            )
            ins = dialect_insert(experiment_state)
            self._upsert_state = ins.on_conflict_do_update(
                index_elements=[experiment_state.c.experiment_id, experiment_state.c.key],
                set_={"value": ins.excluded.value, "updated_at": ins.excluded.updated_at},
            )
            ins = dialect_insert(checkpoints)
            self._upsert_checkpoint = ins.on_conflict_do_update(
                index_elements=[checkpoints.c.trial_id, checkpoints.c.path],
                set_={c: ins.excluded[c] for c in _CHECKPOINT_COLS[3:]},
            )
            self._native_upsert = True
        else:
            self._native_upsert = False
        if d == "sqlite":
            self._sql_results = (
                f"INSERT INTO results ({', '.join(_RESULT_COLS)}) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (trial_id, iteration) DO NOTHING"
            )
        elif d == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._ins_results = pg_insert(results).on_conflict_do_nothing(
                index_elements=[results.c.trial_id, results.c.iteration]
            )
        self._pg_copy = d == "postgresql" and self._engine.dialect.driver == "psycopg"
        self._upd_exp_status = (
            experiments.update()
            .where(experiments.c.id == sa.bindparam("p_id"))
            .values(status=sa.bindparam("p_status"), updated_at=sa.bindparam("p_ts"))
        )
        self._upd_trial_cache: dict[tuple[str, ...], Any] = {}
        # For trials.metric_value: each experiment's metric, each trial's experiment (filled as they
        # are seen, read from the database otherwise).
        self._exp_metric: dict[int, str | None] = {}
        self._trial_exp: dict[str, int] = {}

    def _init_schema(self, create: bool, upgrade: bool) -> None:
        for attempt in range(2):  # a second process may be creating the same schema right now
            try:
                with self._db_lock, self._engine.begin() as conn:
                    if create and self._dialect == "sqlite":
                        # pysqlite leaves DDL outside its implicit transaction: without this, a
                        # reader of a sweep that is just starting sees some tables but no version.
                        conn.exec_driver_sql("BEGIN IMMEDIATE")
                    found = self._check_or_create_schema(conn, create, upgrade)
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
            logger.warning(
                "tuner store %s: upgrading schema version %d -> %d", self.url_for_display, found, SCHEMA_VERSION
            )
            migrate.upgrade(self._url)
            with self._db_lock, self._engine.begin() as conn:
                self._check_or_create_schema(conn, create, upgrade=False)
            return

    def _check_or_create_schema(self, conn: Connection, create: bool, upgrade: bool) -> int | None:
        """Check the schema version, create a new schema; returns the version of an older database
        that ``upgrade`` allows to migrate (None when the database is ready)."""
        names = set(sa.inspect(conn).get_table_names())
        found = migrate.read_schema_version(conn, names)
        if found is None:
            if migrate.holds_data(conn, names):
                raise StoreError(
                    f"database {self.url_for_display} holds tuner tables but no schema version; "
                    f"expected schema version {SCHEMA_VERSION}"
                )
            if not create:
                raise NoSchemaError(
                    f"database {self.url_for_display} has no tuner schema (create=False); "
                    f"expected schema version {SCHEMA_VERSION}"
                )
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
                f"database {self.url_for_display} has tuner schema version {found}, but this version of "
                f"tuner expects schema version {SCHEMA_VERSION}: upgrade tuner to open it"
            )
        if upgrade and found in schema.REVISIONS:
            return found
        raise StoreError(
            f"database {self.url_for_display} has tuner schema version {found}, but this version of "
            f"tuner expects schema version {SCHEMA_VERSION}. To upgrade it: "
            + migrate.upgrade_hint(self._url)
        )

    # ---------------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        if exc_type is None:
            self.close()
        else:  # do not mask the exception in flight
            try:
                self.close()
            except Exception as e:  # noqa: BLE001 - do not mask the exception in flight
                logger.error("tuner store %s: error while closing: %s", self.url_for_display, e)

    def __repr__(self) -> str:
        return f"Store({self.url_for_display!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for read-only queries of other tools, e.g. analysis)."""
        return self._engine

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the writer thread and dispose of the engine. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        _LIVE.discard(self)
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.error("tuner store %s: writer did not stop within %ss", self.url_for_display, timeout)
        else:
            self._engine.dispose()
        self._raise_errors()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes made inside the block into one transaction.

        Either all of them are committed or none (a crash in between cannot split them):
        a trial and the searcher state that produced it, say. Writes still go through the
        writer thread; nothing waits here.
        """
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
                self._queue.put((_GROUP, ops))

    def _put(self, op: tuple) -> None:
        if self._fatal is not None:
            if not self._fatal_told:
                self._raise_fatal()
            return  # the database is gone: there is nowhere to write it
        if self._grouping is not None and threading.get_ident() == self._grouping_thread:
            self._grouping.append(op)
        else:
            self._queue.put(op)

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything queued before this call is committed.

        Raises :class:`StoreError` (chaining the cause) if the writer failed on anything since the last
        flush, or if ``timeout`` seconds pass first.
        """
        self._wait(timeout, read=False)
        self._raise_errors()

    def _wait(self, timeout: float | None = None, *, read: bool = True) -> None:
        """Wait for the writer to commit what is queued; a read then raises if the database is
        lost (a flush, once: see :meth:`_raise_errors`)."""
        if self._closed:
            if self._thread.is_alive() and threading.current_thread() is not self._thread:
                self._thread.join(timeout)
            return
        if not self._thread.is_alive():
            raise StoreError(f"tuner store {self.url_for_display}: writer thread is not running")
        marker = _Flush()
        self._queue.put(marker)
        if not marker.event.wait(timeout):
            raise StoreError(
                f"tuner store {self.url_for_display}: flush did not complete within {timeout}s"
            )
        if read and self._fatal is not None:
            self._raise_fatal()

    def _raise_fatal(self) -> None:
        self._fatal_told = True
        raise StoreError(f"tuner store {self.url_for_display}: {self._fatal}")

    def _raise_errors(self) -> None:
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
            f"tuner store {self.url_for_display}: background write failed: "
            f"{type(first).__name__}: {first}{more}"
        ) from first

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"tuner store {self.url_for_display} is closed")

    # ----------------------------------------------------------------- asynchronous writes (queue)

    def add_trial(
        self,
        experiment_id: int,
        trial_id: str,
        trial_index: int,
        config: Any,
        status: str,
        config_blob: bytes | None = None,
    ) -> None:
        """Queue a new trial (re-adding an existing trial_id updates its config and status)."""
        if self._closed:
            self._check_open()
        self._put(
            (_ADD_TRIAL, experiment_id, trial_id, trial_index, config, status, config_blob, time.time())
        )

    def update_trial(self, trial_id: str, **fields: Any) -> None:
        """Queue an update of a trial. Fields: status, error, num_failures, checkpoint_path,
        last_result (dict), config, config_blob, trial_dir."""
        if self._closed:
            self._check_open()
        if not fields:
            return
        if not _TRIAL_FIELDS.issuperset(fields):
            bad = sorted(set(fields) - _TRIAL_FIELDS)
            raise TypeError(f"update_trial: unknown field(s) {bad}; allowed: {sorted(_TRIAL_FIELDS)}")
        self._put((_UPDATE_TRIAL, trial_id, fields, time.time()))

    def add_results(self, experiment_id: int, rows: Sequence[tuple[str, int, Mapping]]) -> None:
        """Queue result rows ``(trial_id, iteration, result_dict)``. A (trial_id, iteration) already
        stored is ignored, so replaying results is harmless."""
        if self._closed:
            self._check_open()
        self._put((_RESULTS, experiment_id, rows, time.time()))

    def add_result(self, experiment_id: int, trial_id: str, iteration: int, result: Mapping) -> None:
        """Queue one result row (see :meth:`add_results`)."""
        if self._closed:
            self._check_open()
        self._put((_RESULTS, experiment_id, ((trial_id, iteration, result),), time.time()))

    def save_state(self, experiment_id: int, key: str, value: bytes) -> None:
        """Queue a state blob (scheduler, searcher, ...); overwrites the previous value of ``key``."""
        if self._closed:
            self._check_open()
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"save_state: value must be bytes, not {type(value).__name__}")
        self._put((_STATE, experiment_id, key, bytes(value), time.time()))

    def add_exploit(
        self,
        experiment_id: int,
        trial_id: str,
        donor_trial_id: str,
        iteration: int,
        old_config: Mapping,
        new_config: Mapping,
        checkpoint_path: str | None,
    ) -> None:
        """Queue a record of a PBT exploit: ``trial_id`` took ``donor_trial_id``'s checkpoint."""
        self._check_open()
        self._put(
            (_EXPLOIT, experiment_id, trial_id, donor_trial_id, iteration, old_config, new_config,
             checkpoint_path, time.time())
        )

    @_answering
    def exploits(self, experiment_id: int) -> list[dict[str, Any]]:
        """Every recorded exploit of an experiment, oldest first (configs decoded)."""
        self._wait()
        with self._engine.connect() as conn:
            rows = conn.execute(
                sa.select(exploits).where(exploits.c.experiment_id == int(experiment_id)).order_by(exploits.c.id)
            ).mappings().all()
        out = []
        for row in rows:
            item = dict(row)
            item["old_config"] = codec.decode(item["old_config"])
            item["new_config"] = codec.decode(item["new_config"])
            out.append(item)
        return out

    def record_checkpoint(
        self,
        experiment_id: int,
        trial_id: str,
        path: str,
        *,
        iteration: int,
        metrics: Mapping | None,
        timestamp: float,
        deleted_at: float | None = None,
    ) -> None:
        """Queue the record of a checkpoint of ``trial_id`` at ``path`` (the result it was taken with
        in ``metrics``); ``deleted_at`` marks it deleted from disk. One row per trial and path:
        recording a path again replaces its row."""
        self._check_open()
        self._put((_CHECKPOINT, experiment_id, trial_id, path, iteration, metrics, timestamp, deleted_at))

    def save_trial_profile(self, experiment_id: int, trial_id: str, row: Mapping[str, float]) -> None:
        """Queue where a trial's time went (see :mod:`tuner.execution.profiler`): ``cpus``,
        ``hold_s`` and the parts' ``*_s`` seconds; replaces the trial's previous row."""
        self._check_open()
        missing = [c for c in _PROFILE_COLS if c not in row]
        if missing:
            raise ValueError(f"save_trial_profile: row lacks {missing} (expected {list(_PROFILE_COLS)})")
        self._put((_PROFILE, experiment_id, trial_id, {c: float(row[c]) for c in _PROFILE_COLS}))

    @_answering
    def trial_profiles(self, experiment_id: int) -> dict[str, dict[str, float]]:
        """Every stored trial profile of an experiment: trial_id -> {cpus, hold_s, start_s, ...}."""
        self._check_open()
        self._wait()
        stmt = sa.select(trial_profiles).where(trial_profiles.c.experiment_id == int(experiment_id))
        with self._db_lock, self._engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return {
            r["trial_id"]: {k: float(v) for k, v in r.items() if k not in ("experiment_id", "trial_id")}
            for r in rows
        }

    @_answering
    def checkpoints(self, experiment_id: int, trial_id: str | None = None) -> list[dict[str, Any]]:
        """Checkpoint records of an experiment (or one trial), oldest first (by ``timestamp``, when
        the checkpoint was registered): trial_id, path, iteration, timestamp, metrics (decoded),
        deleted, deleted_at."""
        self._check_open()
        self._wait()
        stmt = sa.select(checkpoints).where(checkpoints.c.experiment_id == int(experiment_id))
        if trial_id is not None:
            stmt = stmt.where(checkpoints.c.trial_id == str(trial_id))
        with self._db_lock, self._engine.connect() as conn:
            rows = conn.execute(stmt.order_by(checkpoints.c.timestamp, checkpoints.c.id)).mappings().all()
        out = []
        for row in rows:
            item = dict(row)
            item["metrics"] = codec.decode(item["metrics"])
            item["deleted"] = bool(item["deleted"])
            out.append(item)
        return out

    @_answering
    def delete_results(self, experiment_id: int, trial_id: str) -> int:
        """Delete every stored result of one trial now (a trial restarted from scratch); returns
        how many rows went. Everything queued before is committed first."""
        self._check_open()
        self._wait()
        stmt = results.delete().where(results.c.trial_id == str(trial_id), results.c.experiment_id == int(experiment_id))
        with self._db_lock, self._engine.begin() as conn:
            return int(conn.execute(stmt).rowcount or 0)

    def delete_experiment(self, experiment_id: int) -> None:
        """Delete an experiment with everything stored under it (a sweep that failed its checks
        before any trial reported). Everything queued before is committed first."""
        self._check_open()
        self._wait()
        with self._db_lock, self._engine.begin() as conn:
            for table in (results, checkpoints, exploits, trial_profiles, experiment_state, trials):
                conn.execute(table.delete().where(table.c.experiment_id == int(experiment_id)))
            conn.execute(experiments.delete().where(experiments.c.id == int(experiment_id)))

    def set_experiment_status(self, experiment_id: int, status: str) -> None:
        """Queue a change of an experiment's status."""
        if self._closed:
            self._check_open()
        self._put((_EXP_STATUS, experiment_id, status, time.time()))

    # ----------------------------------------------------------------------- synchronous operations

    @_answering
    def get_or_create_experiment(
        self,
        name: str,
        *,
        spec: Mapping[str, Any],
        metric: str | None,
        mode: str | None,
        status: str = "PENDING",
    ) -> int:
        """Id of the experiment ``name``, created with ``spec``, ``metric``, ``mode`` if absent."""
        self._check_open()
        self._wait()
        existing = self._experiment_id(name)
        if existing is not None:
            return existing
        now = time.time()
        try:
            with self._db_lock, self._engine.begin() as conn:
                res = conn.execute(
                    experiments.insert().values(
                        name=name,
                        spec=codec.encode(dict(spec) if spec is not None else {}),
                        metric=metric,
                        mode=mode,
                        status=status,
                        created_at=now,
                        updated_at=now,
                    )
                )
                return int(res.inserted_primary_key[0])
        except sa.exc.IntegrityError:  # created concurrently by another process
            existing = self._experiment_id(name)
            if existing is None:
                raise
            return existing

    def _experiment_id(self, name: str) -> int | None:
        with self._db_lock, self._engine.connect() as conn:
            v = conn.execute(sa.select(experiments.c.id).where(experiments.c.name == name)).scalar()
        return None if v is None else int(v)

    @staticmethod
    def _experiment_row(row: Any) -> dict[str, Any]:
        d = dict(row._mapping)
        d["spec"] = codec.decode(d["spec"])
        return d

    @_answering
    def get_experiment(self, name: str) -> dict[str, Any] | None:
        """The experiment ``name`` (id, name, spec, metric, mode, status, created_at, updated_at)."""
        self._check_open()
        self._wait()
        with self._db_lock, self._engine.connect() as conn:
            row = conn.execute(sa.select(experiments).where(experiments.c.name == name)).first()
        return None if row is None else self._experiment_row(row)

    @_answering
    def list_experiments(self) -> list[dict[str, Any]]:
        """All experiments, oldest first."""
        self._check_open()
        self._wait()
        with self._db_lock, self._engine.connect() as conn:
            rows = conn.execute(sa.select(experiments).order_by(experiments.c.id)).all()
        return [self._experiment_row(r) for r in rows]

    # ------------------------------------------------------------------------------------- reads

    @_answering
    def trials(self, experiment_id: int) -> list[dict[str, Any]]:
        """Trials of an experiment ordered by trial_index; config and last_result decoded,
        config_blob as raw bytes."""
        self._check_open()
        self._wait()
        stmt = (
            sa.select(trials)
            .where(trials.c.experiment_id == experiment_id)
            .order_by(trials.c.trial_index, trials.c.trial_id)
        )
        with self._db_lock, self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [self._trial_row(r) for r in rows]

    @staticmethod
    def _trial_row(r: Any) -> dict[str, Any]:
        d = dict(r._mapping)
        d["config"] = codec.decode(d["config"])
        d["last_result"] = codec.decode(d["last_result"])
        if d["config_blob"] is not None:
            d["config_blob"] = bytes(d["config_blob"])
        return d

    @_answering
    def best_trial(
        self, experiment_id: int, metric: str, mode: str, *, filter_nan_and_inf: bool = True
    ) -> dict[str, Any] | None:
        """The trial whose last result has the best ``metric`` (``mode`` "max" or "min"), as a row
        of :meth:`trials` with its value added as ``"metric_value"``; None if no trial has a number
        there. The product's one rule (``tuner.best_rule``), the answer of
        ``ExperimentAnalysis.get_best_trial(metric, mode, scope="last")``.

        For the experiment's own metric (``experiments.metric``) it is an index lookup: the store
        keeps that metric's finite value in each last result in ``trials.metric_value``. For any
        other metric, or with ``filter_nan_and_inf=False``, every last result is decoded here.

        It reads ``trials.last_result``, which the controller writes when a trial changes status:
        during a run, a running trial counts with its result at its last status change.
        """
        self._check_open()
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        metric = str(metric)
        eid = int(experiment_id)
        self._wait()
        with self._db_lock, self._engine.connect() as conn:
            if filter_nan_and_inf and metric == self._metric_of(conn, eid):
                best_id, best_value = self._best_by_metric_value(conn, eid, mode)
            else:
                best_id, best_value, _ = pick_best(self._metric_values(conn, eid, metric), mode, filter_nan_and_inf)
            if best_id is None:
                return None
            row = conn.execute(sa.select(trials).where(trials.c.trial_id == best_id)).first()
        if row is None:  # pragma: no cover - deleted in between
            return None
        out = self._trial_row(row)
        out["metric_value"] = best_value
        return out

    @staticmethod
    def _best_by_metric_value(conn: Connection, experiment_id: int, mode: str) -> tuple[str | None, float | None]:
        """The experiment's own metric: trials.metric_value has it, indexed."""
        value = trials.c.metric_value
        row = conn.execute(
            sa.select(trials.c.trial_id, value)
            .where(trials.c.experiment_id == experiment_id, value.is_not(None))
            .order_by(value.desc() if mode == "max" else value.asc(), trials.c.trial_index, trials.c.trial_id)
            .limit(1)
        ).first()
        return (None, None) if row is None else (row[0], float(row[1]))

    @staticmethod
    def _metric_values(conn: Connection, experiment_id: int, metric: str) -> list[tuple[str, float | None]]:
        """(trial_id, the number at ``metric`` in its last result or None), in trial order."""
        stmt = (
            sa.select(trials.c.trial_id, trials.c.last_result)
            .where(trials.c.experiment_id == experiment_id, trials.c.last_result.is_not(None))
            .order_by(trials.c.trial_index, trials.c.trial_id)
        )
        return [(trial_id, number_at(codec.decode(text), metric)) for trial_id, text in conn.execute(stmt)]

    @_answering
    def results(self, experiment_id: int, trial_id: str | None = None) -> list[dict[str, Any]]:
        """Stored result dicts of an experiment (or one trial), ordered by trial then iteration."""
        self._check_open()
        self._wait()
        if trial_id is None:
            stmt = (
                sa.select(results.c.data)
                .select_from(results.join(trials, results.c.trial_id == trials.c.trial_id))
                .where(results.c.experiment_id == experiment_id)
                .order_by(trials.c.trial_index, results.c.trial_id, results.c.iteration)
            )
        else:
            # One trial: its rows through the primary key (trial_id, iteration). "+ 0" keeps the
            # planner off the experiment_id index: PostgreSQL, before its statistics are in,
            # ANDs the two indexes, reading every row of the experiment from the second.
            stmt = (
                sa.select(results.c.data)
                .where(results.c.trial_id == trial_id, (results.c.experiment_id + 0) == experiment_id)
                .order_by(results.c.iteration)
            )
        with self._db_lock, self._engine.connect() as conn:
            data = conn.execute(stmt).scalars().all()
        decode = codec.decode
        return [decode(d) for d in data]

    @_answering
    def load_state(self, experiment_id: int, key: str) -> bytes | None:
        """The last state blob saved under ``key``, or None."""
        self._check_open()
        self._wait()
        stmt = sa.select(experiment_state.c.value).where(
            experiment_state.c.experiment_id == experiment_id, experiment_state.c.key == key
        )
        with self._db_lock, self._engine.connect() as conn:
            v = conn.execute(stmt).scalar()
        return None if v is None else bytes(v)

    # ------------------------------------------------------------------------------ writer thread

    def _writer_main(self) -> None:
        q = self._queue
        interval = self._flush_interval
        conn_box: list[Connection | None] = [None]
        stop = False
        while not stop:
            item = q.get()
            batch = [item]
            urgent = item is _STOP or type(item) is _Flush
            nrows = _weight(item)
            deadline = None
            while nrows < _MAX_BATCH_ROWS:
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    if urgent or interval <= 0:
                        break
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + interval
                    remaining = deadline - now
                    if remaining <= 0:
                        break
                    try:
                        item = q.get(timeout=remaining)
                    except queue.Empty:
                        break
                batch.append(item)
                if item is _STOP or type(item) is _Flush:
                    urgent = True
                else:
                    nrows += _weight(item)
            ops = [x for x in batch if type(x) is tuple]
            began = time.perf_counter()
            try:
                if self._file_id is not None and self._fatal is None:
                    self._check_file(conn_box)
                if ops and self._fatal is None:
                    self._write(ops, conn_box)
            except BaseException as e:  # noqa: BLE001 - never let the writer die
                self._record(e)
            finally:
                self.write_seconds += time.perf_counter() - began
                for x in batch:
                    if x is _STOP:
                        stop = True
                    elif type(x) is _Flush:
                        x.event.set()
        conn = conn_box[0]
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _check_file(self, box: list[Connection | None]) -> None:
        """Is the SQLite file still the one opened? A connection writes on into a removed file
        without a word (its inode lives on until closed), and a new one would make an empty
        database: either way nothing would be stored. So the store fails for good, at once."""
        assert self._file is not None and self._file_id is not None
        try:
            st = os.stat(self._file)
        except FileNotFoundError:
            what = "was removed"
        else:
            if (st.st_dev, st.st_ino) == self._file_id:
                return
            what = "was replaced by another file"
        self._fatal = f"the database file {self._file} {what} while in use; nothing since could be stored"
        logger.debug("tuner store %s: %s", self.url_for_display, self._fatal)
        self._drop_conn(box)
        self._engine.dispose()

    def _record(self, e: BaseException) -> None:
        logger.error("tuner store %s: background write failed: %s", self.url_for_display, e)
        with self._errors_lock:
            self._errors.append(e)

    def _conn(self, box: list[Connection | None]) -> Connection:
        conn = box[0]
        if conn is None or conn.closed or conn.invalidated:
            self._drop_conn(box)
            conn = box[0] = self._engine.connect()
        return conn

    @staticmethod
    def _drop_conn(box: list[Connection | None]) -> None:
        conn, box[0] = box[0], None
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

    def _write(self, ops: list[tuple], box: list[Connection | None]) -> None:
        steps = self._plan(ops)
        for attempt in range(len(_RETRIES) + 1):
            try:
                conn = self._conn(box)
                with self._db_lock, conn.begin():
                    for step in steps:
                        self._execute(conn, step)
                return
            except Exception as e:  # noqa: BLE001 - classified below: transient errors retry, others split the batch
                if not self._is_transient(e):
                    break
                # The connection may be broken: drop it, and retry the batch on a fresh one.
                self._drop_conn(box)
                if attempt == len(_RETRIES):
                    self._record(e)
                    return
                logger.warning(
                    "tuner store %s: write failed (%s), retrying", self.url_for_display, e
                )
                time.sleep(_RETRIES[attempt])
        # A permanent error (e.g. a constraint): apply the batch piece by piece so that one bad
        # row costs only its own piece, and report every failure.
        for step in steps:
            for piece in _split(step):
                try:
                    conn = self._conn(box)
                    with self._db_lock, conn.begin():
                        self._execute(conn, piece)
                except Exception as e:  # noqa: BLE001 - one bad piece is recorded, the others are still written
                    self._record(e)

    def _plan(self, ops: list[tuple]) -> list[tuple]:
        """Turn queued ops into statements, as few as the order of writes allows: ops on trials
        keep their order per trial (a trial's add before its update), so each trial op joins the
        last step of its kind that comes after the trial's previous op; state blobs, experiment
        status and exploits (independent of trials and of each other) form one step each, and all
        result rows (which depend only on their trial existing) go last. Every step is one
        executemany. An op with values that cannot be stored is reported and skipped, not the
        whole batch."""
        encode = codec.encode
        trial_steps: list[tuple] = []
        last_step = {_ADD_TRIAL: -1, _UPDATE_TRIAL: -1}
        touched: dict[str, int] = {}  # trial_id -> index of the last trial step with an op on it

        def trial_acc(kind: int, trial_id: str) -> dict:
            i = last_step[kind]
            if i < 0 or touched.get(trial_id, -1) > i:
                trial_steps.append((kind, {}))
                i = last_step[kind] = len(trial_steps) - 1
            touched[trial_id] = i
            return trial_steps[i][1]

        states: dict[tuple[int, str], dict[str, Any]] = {}
        statuses: list[dict[str, Any]] = []
        exploit_rows: list[dict[str, Any]] = []
        checkpoint_rows: dict[tuple[str, str], dict[str, Any]] = {}
        profile_rows: dict[tuple[int, str], dict[str, Any]] = {}
        # (experiment_id, trial_id, iteration, timestamp, data), in the order of _RESULT_COLS
        result_rows: dict[tuple[str, int], tuple] = {}
        flat: list[tuple] = []
        for op in ops:
            flat.extend(op[1] if op[0] == _GROUP else (op,))
        for op in flat:
            kind = op[0]
            try:
                if kind == _RESULTS:
                    _, eid, rows, now = op
                    eid = int(eid)
                    for trial_id, iteration, res in rows:
                        if type(trial_id) is not str or type(iteration) is not int:
                            trial_id, iteration = str(trial_id), int(iteration)
                        key = (trial_id, iteration)
                        if key in result_rows:
                            continue
                        ts = res.get("timestamp", now) if type(res) is dict or isinstance(res, Mapping) else now
                        if type(ts) is not float:
                            try:
                                ts = float(ts)
                            except (TypeError, ValueError):
                                ts = now
                        if ts != ts:  # NaN (SQLite would store NULL)
                            ts = now
                        result_rows[key] = (eid, trial_id, iteration, ts, encode(res))
                    continue
                if kind == _ADD_TRIAL:
                    _, eid, trial_id, idx, config, status, blob, now = op
                    trial_id = str(trial_id)
                    row = {
                        "experiment_id": int(eid),
                        "trial_id": trial_id,
                        "trial_index": int(idx),
                        "config": encode(config),
                        "config_blob": None if blob is None else bytes(blob),
                        "status": _text(status),
                        "num_failures": 0,
                        "created_at": now,
                        "updated_at": now,
                    }
                    self._trial_exp[trial_id] = row["experiment_id"]
                    acc = trial_acc(kind, trial_id)
                    prev = acc.get(trial_id)
                    if prev is not None and row["config_blob"] is None:  # as the upsert would keep it
                        row["config_blob"] = prev["config_blob"]
                    acc[trial_id] = row
                elif kind == _UPDATE_TRIAL:
                    _, trial_id, fields, now = op
                    trial_id = str(trial_id)
                    new: dict[str, Any] = {}
                    for k, v in fields.items():
                        if k in ("last_result", "config"):
                            v = encode(v)
                        elif v is None:
                            pass
                        elif k == "config_blob":
                            v = bytes(v)
                        elif k == "num_failures":
                            v = int(v)
                        else:  # status, error, checkpoint_path
                            v = _text(v)
                        new[k] = v
                    new["updated_at"] = now
                    trial_acc(kind, trial_id).setdefault(trial_id, {}).update(new)
                elif kind == _STATE:
                    _, eid, key, value, now = op
                    eid, key = int(eid), str(key)
                    states.pop((eid, key), None)  # keep the order of the last writes
                    states[(eid, key)] = {"experiment_id": eid, "key": key, "value": value, "updated_at": now}
                elif kind == _EXPLOIT:
                    _, eid, trial_id, donor, iteration, old, new, ckpt, now = op
                    exploit_rows.append({
                        "experiment_id": int(eid), "trial_id": str(trial_id), "donor_trial_id": str(donor),
                        "iteration": int(iteration), "timestamp": now, "old_config": encode(old),
                        "new_config": encode(new), "checkpoint_path": None if ckpt is None else str(ckpt),
                    })
                elif kind == _EXP_STATUS:
                    _, eid, status, now = op
                    statuses.append({"p_id": int(eid), "p_status": _text(status), "p_ts": now})
                elif kind == _CHECKPOINT:
                    _, eid, trial_id, path, iteration, metrics, ts, deleted_at = op
                    key = (str(trial_id), str(path))
                    checkpoint_rows.pop(key, None)  # the last record of a path wins
                    checkpoint_rows[key] = {
                        "experiment_id": int(eid), "trial_id": key[0], "path": key[1], "iteration": int(iteration),
                        "timestamp": float(ts), "metrics": None if metrics is None else encode(metrics),
                        "deleted": deleted_at is not None,
                        "deleted_at": None if deleted_at is None else float(deleted_at),
                    }
                elif kind == _PROFILE:
                    _, eid, trial_id, values = op
                    key = (int(eid), str(trial_id))
                    profile_rows[key] = {"experiment_id": key[0], "trial_id": key[1], **values}
            except Exception as e:  # noqa: BLE001 - one bad operation is recorded, the others are still written
                self._record(e)
        steps = trial_steps
        if states:
            steps.append((_STATE, states))
        if statuses:
            steps.append((_EXP_STATUS, statuses))
        if exploit_rows:
            steps.append((_EXPLOIT, exploit_rows))
        if checkpoint_rows:
            steps.append((_CHECKPOINT, checkpoint_rows))
        if profile_rows:
            steps.append((_PROFILE, profile_rows))
        if result_rows:
            steps.append((_RESULTS, list(result_rows.values())))
        return steps

    def _execute(self, conn: Connection, step: tuple) -> None:
        kind, acc = step
        if kind == _RESULTS:
            self._insert_results(conn, acc)
        elif kind == _ADD_TRIAL:
            rows = list(acc.values())
            if self._native_upsert:
                conn.execute(self._upsert_trial, rows)
            else:
                for r in rows:
                    keep = ("trial_index", "config", "status", "updated_at")
                    vals = {k: r[k] for k in keep}
                    if r["config_blob"] is not None:
                        vals["config_blob"] = r["config_blob"]
                    upd = trials.update().where(trials.c.trial_id == r["trial_id"]).values(**vals)
                    if conn.execute(upd).rowcount == 0:
                        conn.execute(trials.insert().values(**r))
        elif kind == _UPDATE_TRIAL:
            self._add_metric_values(conn, acc)
            groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for trial_id, vals in acc.items():
                cols = tuple(sorted(vals))
                params = {"p_" + k: v for k, v in vals.items()}
                params["p_trial_id"] = trial_id
                groups.setdefault(cols, []).append(params)
            for cols, params in groups.items():
                stmt = self._upd_trial_cache.get(cols)
                if stmt is None:
                    stmt = self._upd_trial_cache[cols] = (
                        trials.update()
                        .where(trials.c.trial_id == sa.bindparam("p_trial_id"))
                        .values({c: sa.bindparam("p_" + c) for c in cols})
                    )
                conn.execute(stmt, params)
        elif kind == _STATE:
            rows = list(acc.values())
            if self._native_upsert:
                conn.execute(self._upsert_state, rows)
            else:
                for r in rows:
                    upd = (
                        experiment_state.update()
                        .where(
                            experiment_state.c.experiment_id == r["experiment_id"],
                            experiment_state.c.key == r["key"],
                        )
                        .values(value=r["value"], updated_at=r["updated_at"])
                    )
                    if conn.execute(upd).rowcount == 0:
                        conn.execute(experiment_state.insert().values(**r))
        elif kind == _EXP_STATUS:
            conn.execute(self._upd_exp_status, acc)
        elif kind == _EXPLOIT:
            conn.execute(exploits.insert(), acc)
        elif kind == _CHECKPOINT:
            rows = list(acc.values())
            if self._native_upsert:
                conn.execute(self._upsert_checkpoint, rows)
            else:
                for r in rows:
                    upd = (
                        checkpoints.update()
                        .where(checkpoints.c.trial_id == r["trial_id"], checkpoints.c.path == r["path"])
                        .values({c: r[c] for c in _CHECKPOINT_COLS[3:]})
                    )
                    if conn.execute(upd).rowcount == 0:
                        conn.execute(checkpoints.insert().values(**r))
        elif kind == _PROFILE:  # replace: delete the trials' rows, insert the new ones
            rows = list(acc.values())
            for eid in {r["experiment_id"] for r in rows}:
                ids = [r["trial_id"] for r in rows if r["experiment_id"] == eid]
                conn.execute(trial_profiles.delete().where(trial_profiles.c.experiment_id == eid,
                                                           trial_profiles.c.trial_id.in_(ids)))
            conn.execute(trial_profiles.insert(), rows)
        else:  # pragma: no cover
            raise AssertionError(f"unknown store op {kind}")

    def _add_metric_values(self, conn: Connection, acc: dict[str, dict[str, Any]]) -> None:
        """Give every update of last_result its metric_value (once: a retried step keeps it)."""
        todo = [t for t, vals in acc.items() if "last_result" in vals and "metric_value" not in vals]
        if not todo:
            return
        unknown = [t for t in todo if t not in self._trial_exp]
        for i in range(0, len(unknown), 500):  # trials this store did not add (a resumed sweep)
            chunk = unknown[i : i + 500]
            self._trial_exp.update(
                conn.execute(
                    sa.select(trials.c.trial_id, trials.c.experiment_id).where(trials.c.trial_id.in_(chunk))
                ).all()
            )
        for trial_id in todo:
            vals = acc[trial_id]
            eid = self._trial_exp.get(trial_id)
            metric = None if eid is None else self._metric_of(conn, eid)
            vals["metric_value"] = metric_value(vals["last_result"], metric) if metric else None

    def _metric_of(self, conn: Connection, experiment_id: int) -> str | None:
        """The experiment's metric (cached once the experiment exists: it never changes)."""
        if experiment_id not in self._exp_metric:
            row = conn.execute(sa.select(experiments.c.metric).where(experiments.c.id == experiment_id)).first()
            if row is None:
                return None
            self._exp_metric[experiment_id] = row[0]
        return self._exp_metric[experiment_id]

    def _insert_results(self, conn: Connection, rows: list[tuple]) -> None:
        """Insert result rows, ignoring (trial_id, iteration) pairs already stored."""
        if self._dialect == "sqlite":
            # Plain DBAPI executemany: twice as fast as going through Core's parameter processing.
            conn.exec_driver_sql(self._sql_results, rows)
        elif self._pg_copy:
            # COPY straight into results, in a savepoint: a bulk load, more than twice the rate of
            # any INSERT. If a row is there already (a replay), the COPY fails as a whole: then COPY
            # into a session temp table and one INSERT ... SELECT ... ON CONFLICT DO NOTHING.
            # (One results step per transaction, so the load table, emptied at commit, never holds
            # rows of another step.)
            try:
                with conn.begin_nested():
                    self._copy_rows(conn, "results", rows)
                return
            except Exception as e:
                if getattr(e, "sqlstate", None) != "23505":  # unique_violation
                    raise
            conn.exec_driver_sql(
                "CREATE TEMP TABLE IF NOT EXISTS tuner_results_load "
                "(LIKE results INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            self._copy_rows(conn, "tuner_results_load", rows)
            conn.exec_driver_sql(
                f"INSERT INTO results ({', '.join(_RESULT_COLS)}) "
                f"SELECT {', '.join(_RESULT_COLS)} FROM tuner_results_load "
                "ON CONFLICT (trial_id, iteration) DO NOTHING"
            )
        elif self._dialect == "postgresql":
            conn.execute(self._ins_results, [dict(zip(_RESULT_COLS, r)) for r in rows])
        else:
            self._generic_insert_results(conn, rows)

    @staticmethod
    def _copy_rows(conn: Connection, table: str, rows: list[tuple]) -> None:
        cur = conn.connection.dbapi_connection.cursor()
        try:
            with cur.copy(f"COPY {table} ({', '.join(_RESULT_COLS)}) FROM STDIN") as copy:
                write_row = copy.write_row
                for r in rows:
                    write_row(r)
        finally:
            cur.close()

    @staticmethod
    def _generic_insert_results(conn: Connection, rows: list[tuple]) -> None:
        trial_ids = sorted({r[1] for r in rows})
        existing: set[tuple[str, int]] = set()
        for i in range(0, len(trial_ids), 500):
            chunk = trial_ids[i : i + 500]
            existing.update(
                (t, int(it))
                for t, it in conn.execute(
                    sa.select(results.c.trial_id, results.c.iteration).where(
                        results.c.trial_id.in_(chunk)
                    )
                )
            )
        new = [dict(zip(_RESULT_COLS, r)) for r in rows if (r[1], r[2]) not in existing]
        if new:
            conn.execute(results.insert(), new)

def metric_value(last_result: str | None, metric: str) -> float | None:
    """trials.metric_value of a last result (JSON text): the finite number at the flattened key
    ``metric``, as the analysis reads it, else None."""
    if last_result is None:
        return None
    try:
        v = number_at(codec.decode(last_result), metric)
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


def _text(v: Any) -> str:
    if type(v) is str:
        return v
    if isinstance(v, enum.Enum):
        return str(v.value)
    return str(v)


def _weight(item: Any) -> int:
    if type(item) is tuple and item[0] == _RESULTS:
        return len(item[2])
    if type(item) is tuple and item[0] == _GROUP:
        return sum(_weight(op) for op in item[1])
    return 1


def _split(step: tuple) -> list[tuple]:
    """Smaller independent pieces of a step, for the error path: one per trial or per row."""
    kind, acc = step
    if kind == _RESULTS:
        by_trial: dict[str, list] = {}
        for r in acc:
            by_trial.setdefault(r[1], []).append(r)
        return [(kind, rows) for rows in by_trial.values()]
    if isinstance(acc, dict):
        return [(kind, {k: v}) for k, v in acc.items()]
    return [(kind, [r]) for r in acc]
