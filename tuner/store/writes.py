"""The SQL of the store's writes: :class:`Statements` executes each planned step (see
:mod:`.plan`) in the dialect's fastest form, with a portable one for any other database; and the
synchronous writes (experiments, deletions)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..best_rule import number_at
from . import codec
from .ops import RESULT_COLUMNS, ResultRow, Row
from .plan import (
    CheckpointUpserts,
    ExperimentUpdates,
    ExploitInserts,
    LastResults,
    ProfileReplaces,
    ResultInserts,
    StateUpserts,
    StatusUpdates,
    Step,
    TrialInserts,
    TrialUpdates,
)
from .reads import ExperimentMetrics
from .schema import checkpoints, experiment_state, experiments, exploits, results, trial_profiles, trials

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

__all__ = [
    "Statements", "Upsert", "delete_experiment", "delete_results", "insert_experiment", "insert_new_results",
    "metric_value",
]

#: Values per ``IN (...)`` list: a statement takes a bounded number of parameters (999 in older
#: SQLite builds).
IN_CHUNK = 500


@dataclass(frozen=True, eq=False)
class Upsert:
    """Insert rows into ``table``; a row whose ``keys`` are there already updates that row's
    ``columns`` instead, and its ``unless_null`` columns unless the new value is NULL."""

    table: sa.Table
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    unless_null: tuple[str, ...] = ()

    def native(self, dialect: str) -> sa.Insert | None:
        """One ``INSERT ... ON CONFLICT DO UPDATE`` (SQLite, PostgreSQL); None for another database."""
        ins: sqlite.Insert | postgresql.Insert
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            ins = sqlite_insert(self.table)
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            ins = pg_insert(self.table)
        else:
            return None
        set_: dict[str, Any] = {c: ins.excluded[c] for c in self.columns}
        set_.update({c: sa.func.coalesce(ins.excluded[c], self.table.c[c]) for c in self.unless_null})
        return ins.on_conflict_do_update(index_elements=[self.table.c[k] for k in self.keys], set_=set_)

    def row_by_row(self, conn: Connection, rows: Sequence[Row]) -> None:
        """The portable form: an UPDATE per row, and an INSERT where it matched none."""
        for r in rows:
            values = {c: r[c] for c in self.columns}
            values.update({c: r[c] for c in self.unless_null if r[c] is not None})
            update = self.table.update().where(*(self.table.c[k] == r[k] for k in self.keys)).values(values)
            if conn.execute(update).rowcount == 0:
                conn.execute(self.table.insert().values(**r))


#: A re-added trial keeps its config_blob unless a new one comes with it.
TRIAL_UPSERT = Upsert(
    trials, keys=("trial_id",), columns=("trial_index", "config", "status", "updated_at"), unless_null=("config_blob",)
)
STATE_UPSERT = Upsert(experiment_state, keys=("experiment_id", "key"), columns=("value", "updated_at"))
CHECKPOINT_UPSERT = Upsert(
    checkpoints, keys=("trial_id", "path"), columns=("iteration", "timestamp", "metrics", "deleted", "deleted_at")
)

_UPDATE_STATUS = (
    experiments.update()
    .where(experiments.c.id == sa.bindparam("p_id"))
    .values(status=sa.bindparam("p_status"), updated_at=sa.bindparam("p_updated_at"))
)
_SET_LAST_RESULT = (
    trials.update()
    .where(trials.c.trial_id == sa.bindparam("p_trial_id"))
    .values(
        last_result=sa.bindparam("p_last_result"), metric_value=sa.bindparam("p_metric_value"),
        updated_at=sa.bindparam("p_updated_at"),
    )
)
_SQLITE_INSERT_RESULTS = (
    f"INSERT INTO results ({', '.join(RESULT_COLUMNS)}) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (trial_id, iteration) DO NOTHING"
)


def select_in(
    conn: Connection, columns: Sequence[sa.ColumnElement[Any]], key: sa.Column[Any], values: Sequence[Any]
) -> Iterator[Sequence[Any]]:
    """The rows of ``SELECT columns WHERE key IN values``, :data:`IN_CHUNK` values per query."""
    for i in range(0, len(values), IN_CHUNK):
        yield from conn.execute(sa.select(*columns).where(key.in_(values[i : i + IN_CHUNK])))


def _params(row: Row) -> Row:
    """A row as the parameters of an UPDATE: a bound name may not be a column's ('p_' + column)."""
    return {"p_" + k: v for k, v in row.items()}


class Statements:
    """The statements of each kind of step on one database, and what they cache: each trial's
    experiment and each experiment's metric, for trials.metric_value (filled as they are seen,
    read from the database otherwise). Used by the writer thread only."""

    def __init__(self, dialect: sa.Dialect, metrics: ExperimentMetrics) -> None:
        self._dialect = dialect.name
        self._upserts = {u: u.native(self._dialect) for u in (TRIAL_UPSERT, STATE_UPSERT, CHECKPOINT_UPSERT)}
        # psycopg (3): COPY, the fastest load of result rows; another PostgreSQL driver: INSERT.
        self._pg_copy = self._dialect == "postgresql" and dialect.driver == "psycopg"
        self._pg_insert_results: sa.Insert | None = None
        if self._dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._pg_insert_results = pg_insert(results).on_conflict_do_nothing(
                index_elements=[results.c.trial_id, results.c.iteration]
            )
        self._update_trial: dict[tuple[str, ...], sa.Update] = {}  # by the columns they set
        self._metrics = metrics
        self._trial_experiment: dict[str, int] = {}

    def execute(self, conn: Connection, step: Step) -> None:
        if isinstance(step, ResultInserts):
            self._insert_results(conn, list(step.rows.values()))
        elif isinstance(step, TrialInserts):
            rows = list(step.rows.values())
            self._trial_experiment.update((r["trial_id"], r["experiment_id"]) for r in rows)
            self._upsert(conn, TRIAL_UPSERT, rows)
        elif isinstance(step, TrialUpdates):
            self._update_trials(conn, step.rows)
        elif isinstance(step, StateUpserts):
            self._upsert(conn, STATE_UPSERT, list(step.rows.values()))
        elif isinstance(step, StatusUpdates):
            conn.execute(_UPDATE_STATUS, [_params(r) for r in step.rows])
        elif isinstance(step, ExploitInserts):
            conn.execute(exploits.insert(), step.rows)
        elif isinstance(step, CheckpointUpserts):
            self._upsert(conn, CHECKPOINT_UPSERT, list(step.rows.values()))
        elif isinstance(step, ProfileReplaces):
            self._replace_profiles(conn, list(step.rows.values()))
        elif isinstance(step, LastResults):
            self._set_last_results(conn, step)
        elif isinstance(step, ExperimentUpdates):
            for eid, values in step.rows.items():
                conn.execute(experiments.update().where(experiments.c.id == eid).values(values))
        else:
            assert_never(step)

    def _upsert(self, conn: Connection, upsert: Upsert, rows: list[Row]) -> None:
        native = self._upserts[upsert]
        if native is not None:
            conn.execute(native, rows)
        else:
            upsert.row_by_row(conn, rows)

    # --------------------------------------------------------------------------------- trials

    def _update_trials(self, conn: Connection, changes: dict[str, Row]) -> None:
        """One executemany per set of changed columns."""
        self._add_metric_values(conn, changes)
        groups: dict[tuple[str, ...], list[Row]] = {}
        for trial_id, vals in changes.items():
            params = _params(vals)
            params["p_trial_id"] = trial_id
            groups.setdefault(tuple(sorted(vals)), []).append(params)
        for cols, params_list in groups.items():
            stmt = self._update_trial.get(cols)
            if stmt is None:
                stmt = self._update_trial[cols] = (
                    trials.update()
                    .where(trials.c.trial_id == sa.bindparam("p_trial_id"))
                    .values({c: sa.bindparam("p_" + c) for c in cols})
                )
            conn.execute(stmt, params_list)

    def _add_metric_values(self, conn: Connection, changes: dict[str, Row]) -> None:
        """Give every update of last_result its metric_value (once: a retried step keeps it)."""
        todo = [t for t, vals in changes.items() if "last_result" in vals and "metric_value" not in vals]
        if not todo:
            return
        unknown = [t for t in todo if t not in self._trial_experiment]
        if unknown:  # trials this store did not add (a resumed sweep)
            found = select_in(conn, (trials.c.trial_id, trials.c.experiment_id), trials.c.trial_id, unknown)
            self._trial_experiment.update((t, e) for t, e in found)
        for trial_id in todo:
            vals = changes[trial_id]
            eid = self._trial_experiment.get(trial_id)
            metric = None if eid is None else self._metrics.of(conn, eid)
            vals["metric_value"] = metric_value(vals["last_result"], metric) if metric else None

    def _set_last_results(self, conn: Connection, step: LastResults) -> None:
        """Each trial's newest stored result becomes its last_result (and metric_value), so a
        reader in another process sees a running trial's progress, not its last status change."""
        params = []
        for trial_id, latest in step.rows.items():
            metric = self._metrics.of(conn, latest.experiment_id)
            params.append({
                "p_trial_id": trial_id, "p_last_result": latest.text, "p_updated_at": latest.queued_at,
                "p_metric_value": metric_value(latest.text, metric) if metric else None,
            })
        conn.execute(_SET_LAST_RESULT, params)

    def _replace_profiles(self, conn: Connection, rows: list[Row]) -> None:
        """Delete the trials' rows, insert the new ones."""
        for eid in {r["experiment_id"] for r in rows}:
            ids = [r["trial_id"] for r in rows if r["experiment_id"] == eid]
            conn.execute(
                trial_profiles.delete().where(trial_profiles.c.experiment_id == eid, trial_profiles.c.trial_id.in_(ids))
            )
        conn.execute(trial_profiles.insert(), rows)

    # -------------------------------------------------------------------------------- results

    def _insert_results(self, conn: Connection, rows: list[ResultRow]) -> None:
        """Insert result rows, ignoring (trial_id, iteration) pairs already stored."""
        if self._dialect == "sqlite":
            # Plain DBAPI executemany: twice as fast as going through Core's parameter processing.
            conn.exec_driver_sql(_SQLITE_INSERT_RESULTS, rows)
        elif self._pg_copy:
            _copy_results(conn, rows)
        elif self._pg_insert_results is not None:
            conn.execute(self._pg_insert_results, [dict(zip(RESULT_COLUMNS, r)) for r in rows])
        else:
            insert_new_results(conn, rows)


def _copy_results(conn: Connection, rows: list[ResultRow]) -> None:
    """COPY straight into results, in a savepoint: a bulk load, more than twice the rate of any
    INSERT. If a row is there already (a replay), the COPY fails as a whole: then COPY into a
    session temp table and one INSERT ... SELECT ... ON CONFLICT DO NOTHING. (One results step per
    transaction, so the load table, emptied at commit, never holds rows of another step.)"""
    try:
        with conn.begin_nested():
            _copy_rows(conn, "results", rows)
        return
    except Exception as e:
        if getattr(e, "sqlstate", None) != "23505":  # unique_violation
            raise
    conn.exec_driver_sql(
        "CREATE TEMP TABLE IF NOT EXISTS tuner_results_load (LIKE results INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    _copy_rows(conn, "tuner_results_load", rows)
    conn.exec_driver_sql(
        f"INSERT INTO results ({', '.join(RESULT_COLUMNS)}) "
        f"SELECT {', '.join(RESULT_COLUMNS)} FROM tuner_results_load "
        "ON CONFLICT (trial_id, iteration) DO NOTHING"
    )


def _copy_rows(conn: Connection, table: str, rows: list[ResultRow]) -> None:
    driver_conn = conn.connection.driver_connection  # a psycopg Connection
    assert driver_conn is not None
    with driver_conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(RESULT_COLUMNS)}) FROM STDIN") as copy:
        write_row = copy.write_row
        for r in rows:
            write_row(r)


def insert_new_results(conn: Connection, rows: list[ResultRow]) -> None:
    """The portable form: read which of the rows' keys are stored, insert the others."""
    trial_ids = sorted({r[1] for r in rows})
    stored = select_in(conn, (results.c.trial_id, results.c.iteration), results.c.trial_id, trial_ids)
    existing = {(t, int(it)) for t, it in stored}
    new = [dict(zip(RESULT_COLUMNS, r)) for r in rows if (r[1], r[2]) not in existing]
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


# ------------------------------------------------------------------------------ synchronous writes


def insert_experiment(
    conn: Connection, name: str, *, spec: Mapping[str, Any] | None, metric: str | None, mode: str | None,
    status: str, now: float,
) -> int:
    res = conn.execute(
        experiments.insert().values(
            name=name, spec=codec.encode(dict(spec) if spec is not None else {}), metric=metric, mode=mode,
            status=status, created_at=now, updated_at=now,
        )
    )
    assert res.inserted_primary_key is not None
    return int(res.inserted_primary_key[0])


def delete_results(conn: Connection, experiment_id: int, trial_id: str) -> int:
    """Delete a trial's results; returns how many rows went."""
    stmt = results.delete().where(results.c.trial_id == trial_id, results.c.experiment_id == experiment_id)
    return int(conn.execute(stmt).rowcount or 0)


def delete_experiment(conn: Connection, experiment_id: int) -> None:
    """Delete an experiment with every row under it."""
    for table in (results, checkpoints, exploits, trial_profiles, experiment_state, trials):
        conn.execute(table.delete().where(table.c.experiment_id == experiment_id))
    conn.execute(experiments.delete().where(experiments.c.id == experiment_id))
