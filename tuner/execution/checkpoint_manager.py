"""Checkpoint bookkeeping of a sweep: every checkpoint on record, at most ``num_to_keep`` on disk.

Each checkpoint a trial registers is recorded in the store with the result it was taken with.
With ``num_to_keep=N`` (Ray Tune's ``CheckpointConfig``) a trial keeps its N best checkpoints on
disk, ranked by ``checkpoint_score_attribute`` in ``checkpoint_score_order`` (a checkpoint whose
result lacks the attribute, or holds NaN, ranks below every number; ties go to the newer one), or
its N newest without an attribute. As in Ray Tune, the latest checkpoint of a trial that may
still run is never deleted, even when it ranks outside the N best: it is what the trial resumes
from after a failure, a pause or a driver restart. Once the trial has finished (TERMINATED) that
is no longer needed, and the trial is trimmed to exactly its N best (Ray Tune would keep the
latest as well). A checkpoint another trial points at (a PBT exploit restored from it) is never
deleted. Deleted checkpoints stay on record, marked deleted.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from tuner.flatten import flatten_dict
from tuner.storage import Storage, is_uri
from tuner.storage.checkpoints import storage_of
from tuner.store import Store

logger = logging.getLogger(__name__)

SCORE_ORDERS = ("max", "min")
#: Deletes of checkpoints in object storage under way at once (on threads of the driver, off its loop).
DELETES_AT_ONCE = 4


@dataclasses.dataclass
class CheckpointRecord:
    """One checkpoint of a trial, as the store records it."""

    trial_id: str
    path: str
    iteration: int
    metrics: dict[str, Any]
    timestamp: float
    deleted_at: float | None = None


def checkpoint_score(
    record: CheckpointRecord, score_attribute: str | None, score_order: str
) -> tuple[bool, float]:
    """The rank of a checkpoint (higher is better): its attribute, negated for "min"; a missing or
    NaN value ranks below every number."""
    if score_attribute is None:
        return (True, 0.0)
    metrics = record.metrics or {}
    value = metrics.get(score_attribute)
    if value is None and any(isinstance(v, Mapping) for v in metrics.values()):
        value = flatten_dict(metrics).get(score_attribute)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return (False, -math.inf)
    return (True, float(value) if score_order == "max" else -float(value))


def rank_checkpoints(
    records: Sequence[CheckpointRecord], score_attribute: str | None, score_order: str = "max"
) -> list[CheckpointRecord]:
    """``records`` from worst to best (Ray Tune's order of ``best_checkpoints``): by score, and by
    recency among equal scores (or throughout, without a score attribute)."""
    order = {id(r): i for i, r in enumerate(sorted(records, key=lambda r: (r.timestamp, r.iteration)))}
    return sorted(records, key=lambda r: (checkpoint_score(r, score_attribute, score_order), order[id(r)]))


class CheckpointManager:
    """Records a sweep's checkpoints in the store and applies checkpoint retention.

    ``protected`` arguments are callables returning the paths other trials still point at; they
    are only called when something is about to be deleted.
    """

    def __init__(
        self,
        store: Store,
        experiment_id: int,
        run_dir: str,
        *,
        num_to_keep: int | None = None,
        score_attribute: str | None = None,
        score_order: str = "max",
        storage: Storage | None = None,
    ) -> None:
        self._store = store
        self._experiment_id = experiment_id
        self._run_dir = Path(run_dir).absolute()
        # The sweep's object storage, where its checkpoints are (None: its folder, run_dir).
        self._storage = storage if storage is not None and not storage.is_local else None
        # Deletes in object storage take a round trip or two each: off the controller's loop.
        self._deleter: concurrent.futures.ThreadPoolExecutor | None = None
        self.num_to_keep = num_to_keep
        self.score_attribute = score_attribute
        self.score_order = score_order
        self._kept: dict[str, dict[str, CheckpointRecord]] = {}  # trial_id -> path -> record on disk
        self._latest: dict[str, str] = {}  # trial_id -> path of its latest checkpoint

    def load(self) -> None:
        """Take up the records of a resumed sweep (a checkpoint no longer on disk is marked deleted)."""
        for row in self._store.checkpoints(self._experiment_id):
            if row["deleted"]:
                continue
            record = CheckpointRecord(
                trial_id=row["trial_id"], path=row["path"], iteration=int(row["iteration"]),
                metrics=row["metrics"] or {}, timestamp=float(row["timestamp"]),
            )
            if not self.present(record.path):  # deleted by a driver that died before recording it
                self._write(record, deleted_at=time.time())
                continue
            self._kept.setdefault(record.trial_id, {})[record.path] = record
            latest = self._latest.get(record.trial_id)
            if latest is None or record.timestamp >= self._kept[record.trial_id][latest].timestamp:
                self._latest[record.trial_id] = record.path

    def register(
        self, trial_id: str, path: str, iteration: int, metrics: Mapping[str, Any] | None,
        protected: Callable[[], Collection[str]],
    ) -> None:
        """Record a new checkpoint of a trial (the latest), then delete what retention allows."""
        record = CheckpointRecord(
            trial_id=trial_id, path=path, iteration=int(iteration), metrics=dict(metrics or {}),
            timestamp=time.time(),
        )
        self._kept.setdefault(trial_id, {})[path] = record  # a path registered again is replaced
        self._latest[trial_id] = path
        self._write(record)
        self._trim(trial_id, keep_latest=True, protected=protected)

    def finish(self, trial_id: str, protected: Callable[[], Collection[str]]) -> str | None:
        """The trial finished: trim it to its ``num_to_keep`` best. Returns the checkpoint the
        trial should point at from now on when its latest one was deleted (the newest kept)."""
        if not self.num_to_keep or trial_id not in self._kept:
            return None
        self._trim(trial_id, keep_latest=False, protected=protected)
        kept = self._kept.get(trial_id) or {}
        latest = self._latest.get(trial_id)
        if latest is None or latest in kept or not kept:
            return None
        newest = max(kept.values(), key=lambda r: (r.timestamp, r.iteration))
        self._latest[trial_id] = newest.path
        return newest.path

    def forget(self, trial_id: str) -> None:
        """Delete every checkpoint of a trial that restarts from scratch."""
        for record in list((self._kept.get(trial_id) or {}).values()):
            self._delete(record)
        self._latest.pop(trial_id, None)

    def newest(self, trial_id: str) -> CheckpointRecord | None:
        """The trial's newest checkpoint on record and on disk (None: it has none left)."""
        kept = [r for r in (self._kept.get(trial_id) or {}).values() if self.present(r.path)]
        return max(kept, key=lambda r: (r.timestamp, r.iteration)) if kept else None

    def kept(self, trial_id: str) -> list[CheckpointRecord]:
        """The trial's checkpoints on disk, worst to best."""
        return rank_checkpoints(list((self._kept.get(trial_id) or {}).values()), self.score_attribute, self.score_order)

    def _trim(self, trial_id: str, *, keep_latest: bool, protected: Callable[[], Collection[str]]) -> None:
        if not self.num_to_keep:
            return
        ranked = self.kept(trial_id)
        surplus = ranked[: -self.num_to_keep]
        if keep_latest:
            surplus = [r for r in surplus if r.path != self._latest.get(trial_id)]
        if not surplus:
            return
        busy = set(protected())
        for record in surplus:
            if record.path not in busy:
                self._delete(record)

    def present(self, path: str) -> bool:
        """Whether the checkpoint recorded as ``path`` is still there (on disk, or in the object store)."""
        if is_uri(path):
            try:
                return storage_of(path, self._storage).exists(path)
            except (OSError, ValueError):
                return False
        return os.path.isdir(path)

    def _delete(self, record: CheckpointRecord) -> None:
        self._kept.get(record.trial_id, {}).pop(record.path, None)
        if is_uri(record.path):
            owned = self._storage is not None and self._storage.owns(record.path)
        else:
            owned = self._run_dir in Path(record.path).absolute().parents
        if not owned:  # never delete what the sweep did not write
            logger.warning("checkpoint %s is outside the sweep's storage: left in place", record.path)
            return
        record.deleted_at = time.time()
        self._write(record, deleted_at=record.deleted_at)  # on record first: a resume skips it
        if self._storage is not None and is_uri(record.path):
            if self._deleter is None:
                # a delete is a round trip to the store, each checkpoint's its own: several at once
                self._deleter = concurrent.futures.ThreadPoolExecutor(DELETES_AT_ONCE,
                                                                      thread_name_prefix="tuner-checkpoint-delete")
            self._deleter.submit(self._delete_remote, record.path)
        else:
            shutil.rmtree(Path(record.path).absolute(), ignore_errors=True)

    def _delete_remote(self, uri: str) -> None:
        assert self._storage is not None
        try:
            self._storage.delete(uri)
        except OSError as exc:
            logger.warning("could not delete checkpoint %s: %s", uri, exc)

    def close(self) -> None:
        """Wait for the deletes under way (the sweep ends)."""
        if self._deleter is not None:
            self._deleter.shutdown(wait=True)
            self._deleter = None

    def _write(self, record: CheckpointRecord, deleted_at: float | None = None) -> None:
        self._store.record_checkpoint(
            self._experiment_id, record.trial_id, record.path, iteration=record.iteration,
            metrics=record.metrics, timestamp=record.timestamp, deleted_at=deleted_at,
        )


__all__ = ["CheckpointManager", "CheckpointRecord", "SCORE_ORDERS", "checkpoint_score", "rank_checkpoints"]
