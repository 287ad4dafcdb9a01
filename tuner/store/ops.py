"""The writes a :class:`~tuner.store.Store` queues for its writer thread, one frozen dataclass per
kind. They are built on the caller's thread and hold what the caller handed over, unencoded (the
hot path costs one ``queue.put``); the writer turns each into the row it stores (``row()``), so
encoding happens off the caller's thread."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from . import codec
from .schema import trial_profiles

__all__ = [
    "PROFILE_COLUMNS", "RESULT_COLUMNS", "TRIAL_FIELDS", "AddExploit", "AddResults", "AddTrial", "Group",
    "EXPERIMENT_FIELDS", "LatestResult", "Op", "RecordCheckpoint", "ResultKey", "ResultRow", "Row", "SaveState",
    "SaveTrialProfile", "SetExperimentStatus", "UpdateExperiment", "UpdateTrial", "text",
]

#: A row of a table, by column name.
Row = dict[str, Any]
#: A results row in the order of :data:`RESULT_COLUMNS` (a tuple: the bulk paths take them as is).
ResultRow = tuple[int, str, int, float, str]
#: (trial_id, iteration): one result of a trial.
ResultKey = tuple[str, int]

#: The columns of a results row.
RESULT_COLUMNS = ("experiment_id", "trial_id", "iteration", "timestamp", "data")
#: The fields :meth:`Store.update_trial` may change.
TRIAL_FIELDS = frozenset(
    {"status", "error", "num_failures", "checkpoint_path", "last_result", "config", "config_blob", "trial_dir"}
)
#: The fields :meth:`Store.update_experiment` may change (who runs it, and its driver's heartbeat).
EXPERIMENT_FIELDS = frozenset({"owner", "job_id", "job_address", "heartbeat_at", "spec"})
#: The figures of a trial profile row (trial_profiles' columns but its keys).
PROFILE_COLUMNS = tuple(c.name for c in trial_profiles.columns if c.name not in ("experiment_id", "trial_id"))


def text(v: Any) -> str:
    """A status (or error) as stored: an enum's value, anything else as str."""
    if type(v) is str:
        return v
    if isinstance(v, enum.Enum):
        return str(v.value)
    return str(v)


@dataclass(frozen=True, slots=True)
class AddTrial:
    """A new trial (re-adding an existing trial_id updates its config and status)."""

    experiment_id: int
    trial_id: str
    trial_index: int
    config: Any
    status: str
    config_blob: bytes | None
    queued_at: float

    def row(self) -> Row:
        return {
            "experiment_id": int(self.experiment_id),
            "trial_id": str(self.trial_id),
            "trial_index": int(self.trial_index),
            "config": codec.encode(self.config),
            "config_blob": None if self.config_blob is None else bytes(self.config_blob),
            "status": text(self.status),
            "num_failures": 0,
            "created_at": self.queued_at,
            "updated_at": self.queued_at,
        }


@dataclass(frozen=True, slots=True)
class UpdateTrial:
    """New values of some of a trial's :data:`TRIAL_FIELDS`."""

    trial_id: str
    fields: Mapping[str, Any]
    queued_at: float

    def row(self) -> Row:
        """The changed columns, ``updated_at`` included."""
        new: Row = {}
        for k, v in self.fields.items():
            if k in ("last_result", "config"):
                v = codec.encode(v)
            elif v is None:
                pass
            elif k == "config_blob":
                v = bytes(v)
            elif k == "num_failures":
                v = int(v)
            else:  # status, error, checkpoint_path
                v = text(v)
            new[k] = v
        new["updated_at"] = self.queued_at
        return new


@dataclass(frozen=True, slots=True)
class LatestResult:
    """A trial's newest result in a batch of writes: its ``last_result`` (and ``metric_value``)
    as soon as the result is stored, so that readers see a running trial's progress."""

    experiment_id: int
    text: str  # the result as stored (the results row's data)
    queued_at: float


@dataclass(frozen=True, slots=True)
class AddResults:
    """Result rows ``(trial_id, iteration, result_dict)`` of an experiment."""

    experiment_id: int
    rows: Sequence[tuple[str, int, Mapping[str, Any]]]
    queued_at: float

    def add_rows_to(self, out: dict[ResultKey, ResultRow], latest: dict[str, LatestResult]) -> None:
        """Add the rows to ``out``, but a (trial_id, iteration) already there (the first write of a
        result wins, as in the database), and each trial's last row to ``latest`` (what its
        ``last_result`` becomes). A result's timestamp is its ``"timestamp"``, else (none, or not a
        number) when it was queued."""
        eid = int(self.experiment_id)
        now = self.queued_at
        encode = codec.encode
        for trial_id, iteration, res in self.rows:
            if type(trial_id) is not str or type(iteration) is not int:
                trial_id, iteration = str(trial_id), int(iteration)
            key = (trial_id, iteration)
            if key in out:  # replayed in this batch: the row stored stays, the trial is at the replay
                latest[trial_id] = LatestResult(eid, encode(res), now)
                continue
            ts = res.get("timestamp", now) if type(res) is dict or isinstance(res, Mapping) else now
            if type(ts) is not float:
                try:
                    ts = float(ts)
                except (TypeError, ValueError):
                    ts = now
            if ts != ts:  # NaN (SQLite would store NULL)
                ts = now
            data = encode(res)
            out[key] = (eid, trial_id, iteration, ts, data)
            latest[trial_id] = LatestResult(eid, data, now)


@dataclass(frozen=True, slots=True)
class SaveState:
    """A state blob of an experiment (scheduler, searcher, ...), replacing that of ``key``."""

    experiment_id: int
    key: str
    value: bytes
    queued_at: float

    def row(self) -> Row:
        return {
            "experiment_id": int(self.experiment_id), "key": str(self.key), "value": self.value,
            "updated_at": self.queued_at,
        }


@dataclass(frozen=True, slots=True)
class SetExperimentStatus:
    experiment_id: int
    status: str
    queued_at: float

    def row(self) -> Row:
        """The experiments row's id and its new columns."""
        return {"id": int(self.experiment_id), "status": text(self.status), "updated_at": self.queued_at}


@dataclass(frozen=True, slots=True)
class UpdateExperiment:
    """New values of some of an experiment's :data:`EXPERIMENT_FIELDS`."""

    experiment_id: int
    fields: Mapping[str, Any]

    def row(self) -> Row:
        return {k: (None if v is None else float(v) if k == "heartbeat_at" else codec.encode(dict(v)) if k == "spec"
                    else str(v)) for k, v in self.fields.items()}


@dataclass(frozen=True, slots=True)
class AddExploit:
    """A PBT exploit: ``trial_id`` took ``donor_trial_id``'s checkpoint."""

    experiment_id: int
    trial_id: str
    donor_trial_id: str
    iteration: int
    old_config: Mapping[str, Any]
    new_config: Mapping[str, Any]
    checkpoint_path: str | None
    queued_at: float

    def row(self) -> Row:
        return {
            "experiment_id": int(self.experiment_id), "trial_id": str(self.trial_id),
            "donor_trial_id": str(self.donor_trial_id), "iteration": int(self.iteration),
            "timestamp": self.queued_at, "old_config": codec.encode(self.old_config),
            "new_config": codec.encode(self.new_config),
            "checkpoint_path": None if self.checkpoint_path is None else str(self.checkpoint_path),
        }


@dataclass(frozen=True, slots=True)
class RecordCheckpoint:
    """A checkpoint of a trial at ``path`` (``deleted_at``: deleted from disk then); it replaces
    an earlier record of the same trial and path."""

    experiment_id: int
    trial_id: str
    path: str
    iteration: int
    metrics: Mapping[str, Any] | None
    timestamp: float
    deleted_at: float | None

    def row(self) -> Row:
        return {
            "experiment_id": int(self.experiment_id), "trial_id": str(self.trial_id), "path": str(self.path),
            "iteration": int(self.iteration), "timestamp": float(self.timestamp),
            "metrics": None if self.metrics is None else codec.encode(self.metrics),
            "deleted": self.deleted_at is not None,
            "deleted_at": None if self.deleted_at is None else float(self.deleted_at),
        }


@dataclass(frozen=True, slots=True)
class SaveTrialProfile:
    """Where a trial's time went (the :data:`PROFILE_COLUMNS`), replacing its previous profile."""

    experiment_id: int
    trial_id: str
    values: Mapping[str, float]

    def row(self) -> Row:
        return {"experiment_id": int(self.experiment_id), "trial_id": str(self.trial_id), **self.values}


Op = Union[
    AddTrial, UpdateTrial, AddResults, SaveState, SetExperimentStatus, UpdateExperiment, AddExploit, RecordCheckpoint,
    SaveTrialProfile,
]


@dataclass(frozen=True, slots=True)
class Group:
    """Ops made inside one :meth:`Store.batch` block: written in one transaction."""

    ops: tuple[Op, ...]
