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
import logging
import queue
import re
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

from . import codec, schema
from .schema import SCHEMA_VERSION, experiment_state, experiments, exploits, results, trials

__all__ = ["Store", "StoreError", "default_database_url", "mask_url"]

logger = logging.getLogger(__name__)


class StoreError(RuntimeError):
    """Any failure of the store: bad schema version, a failed background write, a closed store."""


# --------------------------------------------------------------------------------------------- URLs


def default_database_url(run_dir: str | Path) -> str:
    """The embedded default: ``sqlite:///<absolute run_dir>/tuner.db``."""
    path = Path(run_dir).expanduser().resolve() / "tuner.db"
    return f"sqlite:///{path.as_posix()}"


_PASSWORD_RE = re.compile(r"(://[^:/?#@]*:)[^@/]*@")


def mask_url(url: str | sa.URL) -> str:
    """``url`` with any password replaced by ``***`` (safe to log or display)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return _PASSWORD_RE.sub(r"\1***@", str(url))


# ------------------------------------------------------------------------------ queue item helpers

# Operation codes (first element of the tuples put on the queue).
_ADD_TRIAL = 1
_UPDATE_TRIAL = 2
_RESULTS = 3
_STATE = 4
_EXP_STATUS = 5
_EXPLOIT = 6
_GROUP = 7  # (_GROUP, [ops]): written in one transaction

_TRIAL_FIELDS = frozenset(
    {"status", "error", "num_failures", "checkpoint_path", "last_result", "config", "config_blob"}
)

_RESULT_COLS = ("experiment_id", "trial_id", "iteration", "timestamp", "data")
_MAX_BATCH_ROWS = 50_000  # commit at least this often under a flood of results
_RETRIES = (0.05, 0.25, 1.0)  # back-off for operational (connection/lock) errors


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
        except Exception as e:
            logger.error("tuner store %s: %s", store.url_for_display, e)


# --------------------------------------------------------------------------------------------- Store


class Store:
    """SQL store of a tuner service (SQLite by default, any SQLAlchemy URL, PostgreSQL tested).

    Args:
        url: SQLAlchemy database URL, e.g. :func:`default_database_url` or
            ``postgresql+psycopg://user:pw@host/db``.
        flush_interval_s: the writer waits at most this long to gather a batch after the first write.
        create: create missing tables (and stamp the schema version). With ``False`` a database
            without the tuner schema is an error.
    """

    def __init__(self, url: str | sa.URL, *, flush_interval_s: float = 0.02, create: bool = True):
        self._url = make_url(url)
        self.url_for_display = mask_url(self._url)
        self._flush_interval = max(0.0, float(flush_interval_s))
        self._closed = False
        self._close_lock = threading.Lock()
        self._errors: list[BaseException] = []
        self._errors_lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._grouping: list[tuple] | None = None  # ops collected by batch(), on its thread
        self._grouping_thread = 0

        self._engine, memory = self._make_engine(self._url)
        # One sqlite in-memory database is one connection shared by all threads: serialize its use.
        self._db_lock: Any = threading.RLock() if memory else contextlib.nullcontext()
        self._dialect = self._engine.dialect.name
        self._build_statements()
        try:
            self._init_schema(create)
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
    def _make_engine(url: sa.URL) -> tuple[Engine, bool]:
        if url.get_backend_name() == "sqlite":
            db = url.database or ""
            memory = db in ("", ":memory:") or "mode=memory" in db
            kwargs: dict[str, Any] = {
                "connect_args": {"check_same_thread": False, "timeout": 30.0},
            }
            if memory:
                kwargs["poolclass"] = StaticPool
            elif not db.startswith("file:"):
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
        return sa.create_engine(url, pool_pre_ping=True), False

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

    def _init_schema(self, create: bool) -> None:
        for attempt in range(2):  # a second process may be creating the same schema right now
            try:
                with self._db_lock, self._engine.begin() as conn:
                    self._check_or_create_schema(conn, create)
                return
            except StoreError:
                raise
            except sa.exc.DBAPIError:
                if attempt:
                    raise
                time.sleep(0.2)

    def _check_or_create_schema(self, conn: Connection, create: bool) -> None:
        names = set(sa.inspect(conn).get_table_names())
        found = None
        if schema.schema_version.name in names:
            found = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
        if found is None:
            if experiments.name in names and conn.execute(
                sa.select(sa.func.count()).select_from(experiments)
            ).scalar():
                raise StoreError(
                    f"database {self.url_for_display} holds tuner tables but no schema version; "
                    f"expected schema version {SCHEMA_VERSION}"
                )
            if not create:
                raise StoreError(
                    f"database {self.url_for_display} has no tuner schema (create=False); "
                    f"expected schema version {SCHEMA_VERSION}"
                )
            schema.metadata.create_all(conn, checkfirst=True)
            conn.execute(schema.schema_version.delete())
            conn.execute(schema.schema_version.insert().values(version=SCHEMA_VERSION))
            return
        found = int(found)
        if found == SCHEMA_VERSION:
            if create:
                schema.metadata.create_all(conn, checkfirst=True)
            return
        if found < SCHEMA_VERSION and all(v in schema.MIGRATIONS for v in range(found, SCHEMA_VERSION)):
            for v in range(found, SCHEMA_VERSION):
                logger.info("tuner store: migrating schema %d -> %d", v, v + 1)
                schema.MIGRATIONS[v](conn)
            conn.execute(schema.schema_version.delete())
            conn.execute(schema.schema_version.insert().values(version=SCHEMA_VERSION))
            return
        raise StoreError(
            f"database {self.url_for_display} has tuner schema version {found}, but this version of "
            f"tuner expects schema version {SCHEMA_VERSION}"
            + ("; upgrade tuner to open it" if found > SCHEMA_VERSION else "; no migration available")
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
            except Exception as e:
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
        if self._grouping is not None and threading.get_ident() == self._grouping_thread:
            self._grouping.append(op)
        else:
            self._queue.put(op)

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything queued before this call is committed.

        Raises :class:`StoreError` (chaining the cause) if the writer failed on anything since the last
        flush, or if ``timeout`` seconds pass first.
        """
        self._wait(timeout)
        self._raise_errors()

    def _wait(self, timeout: float | None = None) -> None:
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

    def _raise_errors(self) -> None:
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
        last_result (dict), config, config_blob."""
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

    def set_experiment_status(self, experiment_id: int, status: str) -> None:
        """Queue a change of an experiment's status."""
        if self._closed:
            self._check_open()
        self._put((_EXP_STATUS, experiment_id, status, time.time()))

    # ----------------------------------------------------------------------- synchronous operations

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

    def get_experiment(self, name: str) -> dict[str, Any] | None:
        """The experiment ``name`` (id, name, spec, metric, mode, status, created_at, updated_at)."""
        self._check_open()
        self._wait()
        with self._db_lock, self._engine.connect() as conn:
            row = conn.execute(sa.select(experiments).where(experiments.c.name == name)).first()
        return None if row is None else self._experiment_row(row)

    def list_experiments(self) -> list[dict[str, Any]]:
        """All experiments, oldest first."""
        self._check_open()
        self._wait()
        with self._db_lock, self._engine.connect() as conn:
            rows = conn.execute(sa.select(experiments).order_by(experiments.c.id)).all()
        return [self._experiment_row(r) for r in rows]

    # ------------------------------------------------------------------------------------- reads

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
        out = []
        decode = codec.decode
        for r in rows:
            d = dict(r._mapping)
            d["config"] = decode(d["config"])
            d["last_result"] = decode(d["last_result"])
            if d["config_blob"] is not None:
                d["config_blob"] = bytes(d["config_blob"])
            out.append(d)
        return out

    def results(self, experiment_id: int, trial_id: str | None = None) -> list[dict[str, Any]]:
        """Stored result dicts of an experiment (or one trial), ordered by trial then iteration."""
        self._check_open()
        self._wait()
        stmt = (
            sa.select(results.c.data)
            .select_from(results.join(trials, results.c.trial_id == trials.c.trial_id))
            .where(results.c.experiment_id == experiment_id)
            .order_by(trials.c.trial_index, results.c.trial_id, results.c.iteration)
        )
        if trial_id is not None:
            stmt = stmt.where(results.c.trial_id == trial_id)
        with self._db_lock, self._engine.connect() as conn:
            data = conn.execute(stmt).scalars().all()
        decode = codec.decode
        return [decode(d) for d in data]

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
            try:
                if ops:
                    self._write(ops, conn_box)
            except BaseException as e:  # never let the writer die
                self._record(e)
            finally:
                for x in batch:
                    if x is _STOP:
                        stop = True
                    elif type(x) is _Flush:
                        x.event.set()
        conn = conn_box[0]
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

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
            except Exception as e:
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
                except Exception as e:
                    self._record(e)

    def _plan(self, ops: list[tuple]) -> list[tuple]:
        """Turn queued ops into statements: consecutive ops of one kind are merged into one
        executemany, and all result rows (which depend only on their trial existing) go last.
        An op with values that cannot be stored is reported and skipped, not the whole batch."""
        encode = codec.encode
        steps: list[tuple] = []
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
                        key = (str(trial_id), int(iteration))
                        if key in result_rows:
                            continue
                        ts = res.get("timestamp", now) if isinstance(res, Mapping) else now
                        try:
                            ts = float(ts)
                        except (TypeError, ValueError):
                            ts = now
                        if ts != ts:  # NaN (SQLite would store NULL)
                            ts = now
                        result_rows[key] = (eid, key[0], key[1], ts, encode(res))
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
                    _acc(steps, kind)[trial_id] = row
                elif kind == _UPDATE_TRIAL:
                    _, trial_id, fields, now = op
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
                    _acc(steps, kind).setdefault(str(trial_id), {}).update(new)
                elif kind == _STATE:
                    _, eid, key, value, now = op
                    eid, key = int(eid), str(key)
                    _acc(steps, kind)[(eid, key)] = {
                        "experiment_id": eid, "key": key, "value": value, "updated_at": now
                    }
                elif kind == _EXPLOIT:
                    _, eid, trial_id, donor, iteration, old, new, ckpt, now = op
                    _acc(steps, kind).append({
                        "experiment_id": int(eid), "trial_id": str(trial_id), "donor_trial_id": str(donor),
                        "iteration": int(iteration), "timestamp": now, "old_config": encode(old),
                        "new_config": encode(new), "checkpoint_path": None if ckpt is None else str(ckpt),
                    })
                elif kind == _EXP_STATUS:
                    _, eid, status, now = op
                    _acc(steps, kind).append({"p_id": int(eid), "p_status": _text(status), "p_ts": now})
            except Exception as e:
                self._record(e)
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
        else:  # pragma: no cover
            raise AssertionError(f"unknown store op {kind}")

    def _insert_results(self, conn: Connection, rows: list[tuple]) -> None:
        """Insert result rows, ignoring (trial_id, iteration) pairs already stored."""
        if self._dialect == "sqlite":
            # Plain DBAPI executemany: twice as fast as going through Core's parameter processing.
            conn.exec_driver_sql(self._sql_results, rows)
        elif self._pg_copy:
            # COPY into a session temp table, then one INSERT ... SELECT ... ON CONFLICT DO NOTHING:
            # about twice the rate of executemany, and still idempotent. (One results step per
            # transaction, so the load table, emptied at commit, never holds rows of another step.)
            conn.exec_driver_sql(
                "CREATE TEMP TABLE IF NOT EXISTS tuner_results_load "
                "(LIKE results INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            cur = conn.connection.dbapi_connection.cursor()
            try:
                with cur.copy(f"COPY tuner_results_load ({', '.join(_RESULT_COLS)}) FROM STDIN") as copy:
                    write_row = copy.write_row
                    for r in rows:
                        write_row(r)
            finally:
                cur.close()
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

def _acc(steps: list[tuple], kind: int) -> Any:
    """The accumulator of the last step if it is of ``kind``, else of a new step."""
    if not steps or steps[-1][0] != kind:
        steps.append((kind, [] if kind in (_EXP_STATUS, _EXPLOIT) else {}))
    return steps[-1][1]


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
