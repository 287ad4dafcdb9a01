"""SQL store of experiments, trials, results and scheduler/searcher state.

Writes go through one background thread that drains a queue in order and commits everything it found
in one transaction per pass, so the controller's hot path (:meth:`Store.add_results`) costs one
``queue.put``. Reads flush first, so a reader in the same process sees its own writes.

Objects handed to the write methods (result dicts, configs) belong to the store from then on: they
are encoded later, on the writer thread, so the caller must not mutate them afterwards.

The parts: :mod:`.engine` opens the database and checks its schema, :mod:`.ops` are the queued
writes, :mod:`.plan` merges a batch of them into steps, :mod:`.writes` holds their SQL,
:mod:`.writer` is the thread, and :mod:`.reads` the queries.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tuner.sweep_status import SweepStatus

from . import reads, writes
from .engine import FileIdentity, check_schema, check_sqlite_file, open_engine
from .errors import StoreError, error_line
from .ops import (
    EXPERIMENT_FIELDS,
    PROFILE_COLUMNS,
    TRIAL_FIELDS,
    AddExploit,
    AddResults,
    AddTrial,
    RecordCheckpoint,
    SaveState,
    SaveTrialProfile,
    SetExperimentStatus,
    UpdateExperiment,
    UpdateTrial,
)
from .urls import check_database_url, default_database_url, mask_url, sqlite_file
from .writer import Writer

__all__ = ["Store", "StoreError", "default_database_url", "mask_url"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _answering(method: Callable[Concatenate[Store, _P], _R]) -> Callable[Concatenate[Store, _P], _R]:
    """A synchronous call of the store: a database error comes out as one StoreError line
    (a corrupt file, a lost connection), the driver's exception as its cause."""

    @functools.wraps(method)
    def call(self: Store, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sa.exc.DBAPIError as exc:
            raise StoreError(self._describe(exc)) from exc

    return call


_LIVE: weakref.WeakSet[Store] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # pragma: no cover - exercised at interpreter exit
    for store in list(_LIVE):
        try:
            store.close()
        except Exception as e:  # noqa: BLE001 - at exit: report every store that fails to close, close the others
            logger.error("tuner store %s: %s", store.url_for_display, e)


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
        if self._file is not None and not create:  # a reader: a missing or empty file is no store
            check_sqlite_file(self._file)
        self._closed = False
        self._close_lock = threading.Lock()
        self._engine, self._db_lock = open_engine(self._url, create=create)
        try:
            check_schema(self._engine, self._db_lock, self._url, create=create, upgrade=upgrade)
            # The file as opened: the writer checks at each pass that it is still there.
            file = None if self._file is None else FileIdentity.of(self._file)
        except sa.exc.DBAPIError as exc:
            self._engine.dispose()
            raise StoreError(self._describe(exc)) from None
        except BaseException:
            self._engine.dispose()
            raise
        self._metrics = reads.ExperimentMetrics()
        self._writer = Writer(
            self._engine,
            writes.Statements(self._engine.dialect, self._metrics),
            self._db_lock,
            display=self.url_for_display,
            flush_interval_s=max(0.0, float(flush_interval_s)),
            file=file,
        )
        _LIVE.add(self)

    def _describe(self, exc: BaseException) -> str:
        """One line for a database error: what could not be done, and the driver's first line."""
        orig = getattr(exc, "orig", None) or exc
        text = error_line(exc, self._url)
        if self._file is not None and isinstance(orig, sqlite3.DatabaseError) and not isinstance(
            orig, sqlite3.OperationalError
        ):
            return f"{self._file} is not a tuner database, or it is corrupt ({text})"
        return f"cannot use the database {self.url_for_display}: {text}"

    @contextlib.contextmanager
    def _connect(self, *, begin: bool = False) -> Iterator[Connection]:
        """A connection of the engine (in a transaction with ``begin``), under the database's lock."""
        with self._db_lock, (self._engine.begin() if begin else self._engine.connect()) as conn:
            yield conn

    # ---------------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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
    def failed(self) -> bool:
        """Whether the database takes no more writes (removed, unwritable, unreachable): the next
        call that writes or flushes raises the StoreError that says why."""
        return self._writer.failed

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for read-only queries of other tools, e.g. analysis)."""
        return self._engine

    @property
    def write_seconds(self) -> float:
        """Seconds the writer thread has spent writing (a sweep's profile reports it)."""
        return self._writer.write_seconds

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the writer thread and dispose of the engine. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        _LIVE.discard(self)
        if self._writer.stop(timeout):
            if not self._writer.abandoned:  # see Writer._fail
                self._engine.dispose()
        else:
            logger.error("tuner store %s: writer did not stop within %ss", self.url_for_display, timeout)
        self._writer.raise_errors()

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Group the writes made inside the block into one transaction.

        Either all of them are committed or none (a crash in between cannot split them):
        a trial and the searcher state that produced it, say. Writes still go through the
        writer thread; nothing waits here.
        """
        return self._writer.batch()

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything queued before this call is committed.

        Raises :class:`StoreError` (chaining the cause) if the writer failed on anything since the last
        flush, or if ``timeout`` seconds pass first.
        """
        self._writer.flush(timeout)

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
        self._writer.put(AddTrial(experiment_id, trial_id, trial_index, config, status, config_blob, time.time()))

    def update_trial(self, trial_id: str, **fields: Any) -> None:
        """Queue an update of a trial. Fields: status, error, num_failures, checkpoint_path,
        last_result (dict), config, config_blob, trial_dir."""
        if self._closed:
            self._check_open()
        if not fields:
            return
        if not TRIAL_FIELDS.issuperset(fields):
            bad = sorted(set(fields) - TRIAL_FIELDS)
            raise TypeError(f"update_trial: unknown field(s) {bad}; allowed: {sorted(TRIAL_FIELDS)}")
        self._writer.put(UpdateTrial(trial_id, fields, time.time()))

    def add_results(self, experiment_id: int, rows: Sequence[tuple[str, int, Mapping]]) -> None:
        """Queue result rows ``(trial_id, iteration, result_dict)``. A (trial_id, iteration) already
        stored is ignored, so replaying results is harmless."""
        if self._closed:
            self._check_open()
        self._writer.put(AddResults(experiment_id, rows, time.time()))

    def add_result(self, experiment_id: int, trial_id: str, iteration: int, result: Mapping) -> None:
        """Queue one result row (see :meth:`add_results`)."""
        if self._closed:
            self._check_open()
        self._writer.put(AddResults(experiment_id, ((trial_id, iteration, result),), time.time()))

    def save_state(self, experiment_id: int, key: str, value: bytes) -> None:
        """Queue a state blob (scheduler, searcher, ...); overwrites the previous value of ``key``."""
        if self._closed:
            self._check_open()
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"save_state: value must be bytes, not {type(value).__name__}")
        self._writer.put(SaveState(experiment_id, key, bytes(value), time.time()))

    def set_experiment_status(self, experiment_id: int, status: str) -> None:
        """Queue a change of an experiment's status."""
        if self._closed:
            self._check_open()
        self._writer.put(SetExperimentStatus(experiment_id, status, time.time()))

    def update_experiment(self, experiment_id: int, **fields: Any) -> None:
        """Queue a change of an experiment's ``owner`` ("user@host"), ``job_id``, ``job_address``
        (its Ray Job), ``heartbeat_at`` (its driver's last sign of life, a Unix time) or ``spec``
        (a mapping: what its driver was called with)."""
        self._check_open()
        if not EXPERIMENT_FIELDS.issuperset(fields):
            bad = sorted(set(fields) - EXPERIMENT_FIELDS)
            raise TypeError(f"update_experiment: unknown field(s) {bad}; allowed: {sorted(EXPERIMENT_FIELDS)}")
        if fields:
            self._writer.put(UpdateExperiment(int(experiment_id), dict(fields)))

    def beat(self, experiment_id: int) -> None:
        """Queue the heartbeat of the experiment's driver (``heartbeat_at`` = now). It never
        raises: a store that failed tells the sweep's own calls, not the heartbeat's thread."""
        if not self._closed:
            self._writer.put(UpdateExperiment(int(experiment_id), {"heartbeat_at": time.time()}), quiet=True)

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
        self._writer.put(
            AddExploit(
                experiment_id, trial_id, donor_trial_id, iteration, old_config, new_config, checkpoint_path,
                time.time(),
            )
        )

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
        self._writer.put(RecordCheckpoint(experiment_id, trial_id, path, iteration, metrics, timestamp, deleted_at))

    def save_trial_profile(self, experiment_id: int, trial_id: str, row: Mapping[str, float]) -> None:
        """Queue where a trial's time went (see :mod:`tuner.execution.profiler`): ``cpus``,
        ``hold_s`` and the parts' ``*_s`` seconds; replaces the trial's previous row."""
        self._check_open()
        missing = [c for c in PROFILE_COLUMNS if c not in row]
        if missing:
            raise ValueError(f"save_trial_profile: row lacks {missing} (expected {list(PROFILE_COLUMNS)})")
        self._writer.put(SaveTrialProfile(experiment_id, trial_id, {c: float(row[c]) for c in PROFILE_COLUMNS}))

    # ----------------------------------------------------------------------- synchronous writes

    @_answering
    def get_or_create_experiment(
        self,
        name: str,
        *,
        spec: Mapping[str, Any],
        metric: str | None,
        mode: str | None,
        status: str = SweepStatus.PENDING,
    ) -> int:
        """Id of the experiment ``name``, created with ``spec``, ``metric``, ``mode`` if absent."""
        self._check_open()
        self._writer.wait()
        existing = self._experiment_id(name)
        if existing is not None:
            return existing
        try:
            with self._connect(begin=True) as conn:
                return writes.insert_experiment(
                    conn, name, spec=spec, metric=metric, mode=mode, status=status, now=time.time()
                )
        except sa.exc.IntegrityError:  # created concurrently by another process
            existing = self._experiment_id(name)
            if existing is None:
                raise
            return existing

    def _experiment_id(self, name: str) -> int | None:
        with self._connect() as conn:
            return reads.find_experiment_id(conn, name)

    @_answering
    def delete_results(self, experiment_id: int, trial_id: str) -> int:
        """Delete every stored result of one trial now (a trial restarted from scratch); returns
        how many rows went. Everything queued before is committed first."""
        self._check_open()
        self._writer.wait()
        with self._connect(begin=True) as conn:
            return writes.delete_results(conn, int(experiment_id), str(trial_id))

    def delete_experiment(self, experiment_id: int) -> None:
        """Delete an experiment with everything stored under it (a sweep that failed its checks
        before any trial reported). Everything queued before is committed first."""
        self._check_open()
        self._writer.wait()
        with self._connect(begin=True) as conn:
            writes.delete_experiment(conn, int(experiment_id))

    # ------------------------------------------------------------------------------------- reads

    @_answering
    def get_experiment(self, name: str) -> dict[str, Any] | None:
        """The experiment ``name`` (id, name, spec, metric, mode, status, created_at, updated_at)."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.find_experiment(conn, name)

    @_answering
    def list_experiments(self) -> list[dict[str, Any]]:
        """All experiments, oldest first."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.list_experiments(conn)

    @_answering
    def trials(self, experiment_id: int) -> list[dict[str, Any]]:
        """Trials of an experiment ordered by trial_index; config and last_result decoded,
        config_blob as raw bytes."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.list_trials(conn, experiment_id)

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

        It reads ``trials.last_result``: each trial's newest stored result (written with the
        results, and when the trial changes status), so a running trial counts with its latest.
        """
        self._check_open()
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        eid = int(experiment_id)
        self._writer.wait()
        with self._connect() as conn:
            return reads.find_best_trial(
                conn, eid, str(metric), mode, filter_nan_and_inf=filter_nan_and_inf, metrics=self._metrics
            )

    @_answering
    def results(self, experiment_id: int, trial_id: str | None = None) -> list[dict[str, Any]]:
        """Stored result dicts of an experiment (or one trial), ordered by trial then iteration."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.list_results(conn, experiment_id, trial_id)

    @_answering
    def load_state(self, experiment_id: int, key: str) -> bytes | None:
        """The last state blob saved under ``key``, or None."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.find_state(conn, experiment_id, key)

    @_answering
    def exploits(self, experiment_id: int) -> list[dict[str, Any]]:
        """Every recorded exploit of an experiment, oldest first (configs decoded)."""
        self._writer.wait()
        with self._connect() as conn:
            return reads.list_exploits(conn, int(experiment_id))

    @_answering
    def checkpoints(self, experiment_id: int, trial_id: str | None = None) -> list[dict[str, Any]]:
        """Checkpoint records of an experiment (or one trial), oldest first (by ``timestamp``, when
        the checkpoint was registered): trial_id, path, iteration, timestamp, metrics (decoded),
        deleted, deleted_at."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.list_checkpoints(conn, int(experiment_id), None if trial_id is None else str(trial_id))

    @_answering
    def trial_profiles(self, experiment_id: int) -> dict[str, dict[str, float]]:
        """Every stored trial profile of an experiment: trial_id -> {cpus, hold_s, start_s, ...}."""
        self._check_open()
        self._writer.wait()
        with self._connect() as conn:
            return reads.list_trial_profiles(conn, int(experiment_id))
