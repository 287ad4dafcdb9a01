"""The store's read queries, each on a connection the caller holds; JSON columns come back decoded."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from ..best_rule import number_at, pick_best
from . import codec
from .schema import checkpoints, experiment_state, experiments, exploits, results, trial_profiles, trials

__all__ = [
    "ExperimentMetrics", "find_best_trial", "find_experiment", "find_experiment_id", "find_state",
    "list_checkpoints", "list_experiments", "list_exploits", "list_results", "list_trial_profiles", "list_trials",
]


class ExperimentMetrics:
    """Each experiment's metric (cached once the experiment exists: it never changes)."""

    def __init__(self) -> None:
        self._known: dict[int, str | None] = {}

    def of(self, conn: Connection, experiment_id: int) -> str | None:
        if experiment_id not in self._known:
            row = conn.execute(sa.select(experiments.c.metric).where(experiments.c.id == experiment_id)).first()
            if row is None:
                return None
            self._known[experiment_id] = row[0]
        return self._known[experiment_id]


# ------------------------------------------------------------------------------------ experiments


def find_experiment_id(conn: Connection, name: str) -> int | None:
    v = conn.execute(sa.select(experiments.c.id).where(experiments.c.name == name)).scalar()
    return None if v is None else int(v)


def find_experiment(conn: Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute(sa.select(experiments).where(experiments.c.name == name)).first()
    return None if row is None else _experiment_row(row._mapping)


def list_experiments(conn: Connection) -> list[dict[str, Any]]:
    return [_experiment_row(r) for r in conn.execute(sa.select(experiments).order_by(experiments.c.id)).mappings()]


def _experiment_row(row: RowMapping) -> dict[str, Any]:
    d = dict(row)
    d["spec"] = codec.decode(d["spec"])
    return d


def find_state(conn: Connection, experiment_id: int, key: str) -> bytes | None:
    stmt = sa.select(experiment_state.c.value).where(
        experiment_state.c.experiment_id == experiment_id, experiment_state.c.key == key
    )
    v = conn.execute(stmt).scalar()
    return None if v is None else bytes(v)


# ----------------------------------------------------------------------------------------- trials


def list_trials(conn: Connection, experiment_id: int) -> list[dict[str, Any]]:
    stmt = (
        sa.select(trials)
        .where(trials.c.experiment_id == experiment_id)
        .order_by(trials.c.trial_index, trials.c.trial_id)
    )
    return [_trial_row(r) for r in conn.execute(stmt).mappings().all()]


def _trial_row(row: RowMapping) -> dict[str, Any]:
    d = dict(row)
    d["config"] = codec.decode(d["config"])
    d["last_result"] = codec.decode(d["last_result"])
    if d["config_blob"] is not None:
        d["config_blob"] = bytes(d["config_blob"])
    return d


def find_best_trial(
    conn: Connection,
    experiment_id: int,
    metric: str,
    mode: str,
    *,
    filter_nan_and_inf: bool,
    metrics: ExperimentMetrics,
) -> dict[str, Any] | None:
    """The row of the trial whose last result is best at ``metric`` (see :meth:`Store.best_trial`)."""
    if filter_nan_and_inf and metric == metrics.of(conn, experiment_id):
        best_id, best_value = _best_by_metric_value(conn, experiment_id, mode)
    else:
        best_id, best_value, _ = pick_best(_metric_values(conn, experiment_id, metric), mode, filter_nan_and_inf)
    if best_id is None:
        return None
    row = conn.execute(sa.select(trials).where(trials.c.trial_id == best_id)).first()
    if row is None:  # pragma: no cover - deleted in between
        return None
    out = _trial_row(row._mapping)
    out["metric_value"] = best_value
    return out


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


def _metric_values(conn: Connection, experiment_id: int, metric: str) -> list[tuple[str, float | None]]:
    """(trial_id, the number at ``metric`` in its last result or None), in trial order."""
    stmt = (
        sa.select(trials.c.trial_id, trials.c.last_result)
        .where(trials.c.experiment_id == experiment_id, trials.c.last_result.is_not(None))
        .order_by(trials.c.trial_index, trials.c.trial_id)
    )
    return [(trial_id, number_at(codec.decode(text), metric)) for trial_id, text in conn.execute(stmt)]


# ---------------------------------------------------------------------------- results and the rest


def list_results(conn: Connection, experiment_id: int, trial_id: str | None) -> list[Any]:
    """Result dicts of an experiment (or one trial), ordered by trial then iteration."""
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
    decode = codec.decode
    return [decode(d) for d in conn.execute(stmt).scalars().all()]


def list_exploits(conn: Connection, experiment_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(exploits).where(exploits.c.experiment_id == experiment_id).order_by(exploits.c.id)
    ).mappings().all()
    out = []
    for row in rows:
        item = dict(row)
        item["old_config"] = codec.decode(item["old_config"])
        item["new_config"] = codec.decode(item["new_config"])
        out.append(item)
    return out


def list_checkpoints(conn: Connection, experiment_id: int, trial_id: str | None) -> list[dict[str, Any]]:
    stmt = sa.select(checkpoints).where(checkpoints.c.experiment_id == experiment_id)
    if trial_id is not None:
        stmt = stmt.where(checkpoints.c.trial_id == trial_id)
    rows = conn.execute(stmt.order_by(checkpoints.c.timestamp, checkpoints.c.id)).mappings().all()
    out = []
    for row in rows:
        item = dict(row)
        item["metrics"] = codec.decode(item["metrics"])
        item["deleted"] = bool(item["deleted"])
        out.append(item)
    return out


def list_trial_profiles(conn: Connection, experiment_id: int) -> dict[str, dict[str, float]]:
    stmt = sa.select(trial_profiles).where(trial_profiles.c.experiment_id == experiment_id)
    return {
        r["trial_id"]: {k: float(v) for k, v in r.items() if k not in ("experiment_id", "trial_id")}
        for r in conn.execute(stmt).mappings().all()
    }
