"""How a batch of queued writes becomes steps, each one executemany on one table.

Ops are merged into as few steps as the order of writes allows: ops on trials keep their order
per trial (a trial's add before its update), so each trial op joins the last step of its kind
that comes after the trial's previous op; state blobs, experiment status, exploits, checkpoints
and profiles (independent of trials and of each other) form one step each, and all result rows
(which depend only on their trial existing) go last, followed by each trial's newest result as
its ``last_result``, unless a later update of the trial set that itself.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Self, TypeVar, Union, assert_never

from .ops import (
    AddExploit,
    AddResults,
    AddTrial,
    Group,
    LatestResult,
    Op,
    RecordCheckpoint,
    ResultKey,
    ResultRow,
    Row,
    SaveState,
    SaveTrialProfile,
    SetExperimentStatus,
    UpdateExperiment,
    UpdateTrial,
)

__all__ = [
    "CheckpointUpserts", "ExperimentUpdates", "ExploitInserts", "LastResults", "ProfileReplaces", "ResultInserts", "StateUpserts",
    "StatusUpdates",
    "Step", "TrialInserts", "TrialUpdates", "plan",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


# -------------------------------------------------------------------------------------- steps


@dataclass(eq=False)
class KeyedStep(Generic[K, V]):
    """Rows by key: a later write of a key replaces (or adds to) the earlier one."""

    rows: dict[K, V] = field(default_factory=dict)

    def put_last(self, key: K, row: V) -> None:
        """``row`` under ``key``, replacing an earlier one: rows keep the order of their last writes."""
        self.rows.pop(key, None)
        self.rows[key] = row

    def pieces(self) -> list[Self]:
        """Smaller independent pieces, for the error path: one per key."""
        return [type(self)({k: v}) for k, v in self.rows.items()]


@dataclass(eq=False)
class ListStep:
    """Rows that are all written, in order."""

    rows: list[Row] = field(default_factory=list)

    def pieces(self) -> list[Self]:
        """Smaller independent pieces, for the error path: one per row."""
        return [type(self)([r]) for r in self.rows]


class TrialInserts(KeyedStep[str, Row]):
    """trial_id -> the trial's row, upserted."""


class TrialUpdates(KeyedStep[str, Row]):
    """trial_id -> the columns to change."""


class StateUpserts(KeyedStep[tuple[int, str], Row]):
    """(experiment_id, key) -> the state row."""


class CheckpointUpserts(KeyedStep[tuple[str, str], Row]):
    """(trial_id, path) -> the checkpoint row."""


class ProfileReplaces(KeyedStep[tuple[int, str], Row]):
    """(experiment_id, trial_id) -> the trial's profile row, replacing the stored one."""


class ResultInserts(KeyedStep[ResultKey, ResultRow]):
    """(trial_id, iteration) -> the result row; one already stored is left as it is."""

    def pieces(self) -> list[Self]:
        """One per trial."""
        by_trial: dict[str, dict[ResultKey, ResultRow]] = {}
        for key, row in self.rows.items():
            by_trial.setdefault(key[0], {})[key] = row
        return [type(self)(rows) for rows in by_trial.values()]


@dataclass(eq=False)
class LastResults(KeyedStep[str, LatestResult]):
    """trial_id -> the trial's newest stored result, its ``last_result`` from now on; and the
    trials whose last_result an update of the batch set after their results (``superseded``:
    a newest result held back from an earlier batch must not overwrite it)."""

    superseded: set[str] = field(default_factory=set)


class ExperimentUpdates(KeyedStep[int, Row]):
    """experiment_id -> the columns to change (owner, job, heartbeat)."""


class StatusUpdates(ListStep):
    """Experiments' new status (the row's id, status and updated_at)."""


class ExploitInserts(ListStep):
    """Exploit rows."""


Step = Union[
    TrialInserts, TrialUpdates, StateUpserts, StatusUpdates, ExploitInserts, CheckpointUpserts, ProfileReplaces,
    ResultInserts, LastResults, ExperimentUpdates,
]
TrialStep = TypeVar("TrialStep", TrialInserts, TrialUpdates)


# --------------------------------------------------------------------------------------- plan


def plan(ops: Iterable[Op | Group], on_error: Callable[[Exception], None]) -> list[Step]:
    """The steps that write ``ops``, in order. An op with values that cannot be stored goes to
    ``on_error`` and is skipped, not the whole batch."""
    planner = _Planner()
    for item in ops:
        for op in item.ops if isinstance(item, Group) else (item,):
            try:
                planner.add(op)
            except Exception as e:  # noqa: BLE001 - one bad operation is recorded, the others are still written
                on_error(e)
    return planner.steps()


class _Planner:
    def __init__(self) -> None:
        self._trial_steps: list[TrialInserts | TrialUpdates] = []
        self._last_of_kind: dict[type, int] = {}  # the index of the last trial step of each kind
        self._touched: dict[str, int] = {}  # trial_id -> index of the last trial step with an op on it
        self._states = StateUpserts()
        self._statuses = StatusUpdates()
        self._experiments = ExperimentUpdates()
        self._exploits = ExploitInserts()
        self._checkpoints = CheckpointUpserts()
        self._profiles = ProfileReplaces()
        self._results = ResultInserts()
        self._latest = LastResults()

    def add(self, op: Op) -> None:
        if isinstance(op, AddResults):  # the hot path first
            op.add_rows_to(self._results.rows, self._latest.rows)
        elif isinstance(op, AddTrial):
            row = op.row()
            trial_id = row["trial_id"]
            rows = self._trial_step(TrialInserts, trial_id).rows
            prev = rows.get(trial_id)
            if prev is not None and row["config_blob"] is None:  # as the upsert would keep it
                row["config_blob"] = prev["config_blob"]
            rows[trial_id] = row
        elif isinstance(op, UpdateTrial):
            row = op.row()
            trial_id = str(op.trial_id)
            if "last_result" in row:  # written after the trial's results so far: it is the newer
                self._latest.rows.pop(trial_id, None)
                self._latest.superseded.add(trial_id)
            self._trial_step(TrialUpdates, trial_id).rows.setdefault(trial_id, {}).update(row)
        elif isinstance(op, SaveState):
            row = op.row()
            self._states.put_last((row["experiment_id"], row["key"]), row)  # keep the order of the last writes
        elif isinstance(op, SetExperimentStatus):
            self._statuses.rows.append(op.row())
        elif isinstance(op, UpdateExperiment):
            self._experiments.rows.setdefault(int(op.experiment_id), {}).update(op.row())
        elif isinstance(op, AddExploit):
            self._exploits.rows.append(op.row())
        elif isinstance(op, RecordCheckpoint):
            row = op.row()
            self._checkpoints.put_last((row["trial_id"], row["path"]), row)  # the last record of a path wins
        elif isinstance(op, SaveTrialProfile):
            row = op.row()
            self._profiles.rows[(row["experiment_id"], row["trial_id"])] = row
        else:
            assert_never(op)

    def _trial_step(self, kind: type[TrialStep], trial_id: str) -> TrialStep:
        """The step of ``kind`` that ``trial_id``'s next op joins: the last one of its kind, unless
        the trial has an op in a later step (then a new one)."""
        i = self._last_of_kind.get(kind, -1)
        if i < 0 or self._touched.get(trial_id, -1) > i:
            self._trial_steps.append(kind())
            i = self._last_of_kind[kind] = len(self._trial_steps) - 1
        self._touched[trial_id] = i
        step = self._trial_steps[i]
        assert isinstance(step, kind)
        return step

    def steps(self) -> list[Step]:
        steps: list[Step] = list(self._trial_steps)
        others: tuple[Step, ...] = (
            self._states, self._statuses, self._experiments, self._exploits, self._checkpoints, self._profiles, self._results,
            self._latest,
        )
        steps.extend(step for step in others if step.rows or (step is self._latest and self._latest.superseded))
        return steps
