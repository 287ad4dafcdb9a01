"""Where a sweep's trials put their checkpoints, and which of them are on record.

A trial writes its checkpoints to the sweep's object storage when it has one, else to the run
directory on its own node; on a cluster of several nodes with a plain folder, a keeper actor on
the driver's node takes a copy of each (``tuner.storage.keeper``). A checkpoint is recorded once
it is there: an upload still under way is held back, and the uploads a trial reports land in
the order they were made. Retention (``CheckpointManager``) never deletes a checkpoint a trial
points at.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

import ray

from tuner.execution.checkpoint_manager import CheckpointManager
from tuner.execution.slots import SlotPool
from tuner.execution.sweep_record import SweepRecord
from tuner.execution.trial import Trial
from tuner.storage import Storage
from tuner.storage.keeper import start_keeper
from tuner.trainable.context import TrialInfo

logger = logging.getLogger("tuner.execution.controller")


class TrialCheckpoints:
    """The checkpoints of ``trials()``: where they go (:meth:`place`), on record once there
    (:meth:`landed`), trimmed when a trial finishes (:meth:`finish`). ``landed(trial, path)`` is
    called for each checkpoint recorded (the ``on_checkpoint`` callbacks)."""

    def __init__(self, manager: CheckpointManager, record: SweepRecord, pool: SlotPool, experiment_name: str,
                 storage: Storage | None, trials: Callable[[], list[Trial]],
                 landed: Callable[[Trial, str], None], function_trainable: bool = False,
                 pinned: Callable[[], set[str]] = set) -> None:
        self._manager = manager
        self._record = record
        self._pool = pool
        self._experiment_name = experiment_name
        # The sweep's object storage, where trials put their checkpoints (None: the run directory).
        self._storage = storage if storage is not None and not storage.is_local else None
        self._trials = trials
        self._landed = landed
        # A plain folder on a cluster of several nodes: the actor keeping checkpoints on this node
        # (made once a second node is seen, see _keeper).
        self._keeper: tuple[Any, str] | None = None
        self._function_trainable = function_trainable
        self._pinned = pinned  # checkpoints that exploits not yet applied will take
        self._warned_unsavable = False

    def place(self, trial: Trial, info: TrialInfo, *, new_group: bool = True) -> TrialInfo:
        """``info`` with where the trial's checkpoints go: the sweep's object storage, or the keeper.

        ``new_group``: the trial runs in a placement group placed just now, perhaps on a node that
        joined meanwhile, so the cluster's nodes are read again; a group used before stays on the
        node it was placed on, which was this one unless the keeper already runs."""
        if self._storage is None:
            keeper = self._keeper_on_cluster() if new_group else self._keeper
            return info if keeper is None else dataclasses.replace(info, keeper=keeper[0], driver_node=keeper[1])
        folder = self._storage.join(self._experiment_name, os.path.basename(trial.trial_dir))
        return dataclasses.replace(info, storage=self._storage, storage_dir=folder)

    def _keeper_on_cluster(self) -> tuple[Any, str] | None:
        """The sweep's checkpoint keeper once the cluster has a second node (the sweep's folder is
        on this node's disk only, as far as anyone knows: see ``tuner.storage.keeper``)."""
        if self._keeper is None:
            self._pool.read_cluster_resources(force=True)
            if len(self._pool.nodes) > 1:
                self._keeper = start_keeper()
        return self._keeper

    def unsavable(self, trial: Trial) -> bool:
        """Whether ``trial`` is a function trainable that has reported no checkpoint, which can
        neither pause nor give one."""
        return self._function_trainable and not trial.checkpoint_path

    def cannot_save(self, trial: Trial, to: str) -> bool:
        """:meth:`unsavable`, warned once per sweep, saying what the trial cannot ``to`` do."""
        if not self.unsavable(trial):
            return False
        if not self._warned_unsavable:
            self._warned_unsavable = True
            logger.warning("trial %s cannot %s: its function has reported no checkpoint (pass checkpoint= to "
                           "tune.report to make it pausable); such trials keep running instead", trial.trial_name, to)
        return True

    def landed(self, trial: Trial, path: str) -> None:
        """The trial's checkpoint ``path`` is there (written, or its upload confirmed): record it,
        after every earlier upload of the trial (a save the controller asked for answers once all
        of the trial's uploads are; its checkpoint comes after them)."""
        # Results first: a checkpoint on record must never be ahead of the stored results it
        # covers, or a resume from it would leave a gap in the trial's curve.
        self._record.flush_results()
        uploads = [uri for uri, _, _ in trial.pending_uploads]
        if path in uploads:
            confirmed = trial.pending_uploads[:uploads.index(path) + 1]
        else:
            confirmed = [*trial.pending_uploads, (path, trial.iteration, trial.last_result)]
        del trial.pending_uploads[:len(confirmed)]
        for uri, iteration, metrics in confirmed:
            trial.checkpoint_path = uri
            trial.own_progress = None  # its own checkpoint now, with its own iteration
            self._record.checkpoint(trial.trial_id, uri)
            self._manager.register(trial.trial_id, uri, iteration, metrics,
                                   protected=lambda: self._pointed_at(but=None))
            self._landed(trial, uri)

    def finish(self, trial: Trial) -> str | None:
        """The trial finished: trimmed to its ``num_to_keep`` best; its checkpoint's new path if moved."""
        moved = self._manager.finish(trial.trial_id, protected=lambda: self._pointed_at(but=trial))
        if moved is not None:
            trial.checkpoint_path = moved
        return moved

    def _pointed_at(self, but: Trial | None) -> set[str]:
        """The checkpoints trials point at (other than ``but``), and those exploits will take:
        retention must not delete them."""
        return {t.checkpoint_path for t in self._trials() if t is not but and t.checkpoint_path} | self._pinned()

    def close(self) -> None:
        """Wait for deletes under way; the keeper goes."""
        self._manager.close()
        if self._keeper is not None:
            ray.kill(self._keeper[0])
            self._keeper = None
