"""A trial as the controller sees it: a config, a status, its latest result and checkpoint."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from schedulers.trial_status import TrialStatus
from tuner.execution.resources import PlacementGroupFactory
from tuner.trainable.context import TrialInfo


@dataclasses.dataclass(eq=False)
class Trial:
    """One configuration being trained. Plain data: the Ray handles live in the controller."""

    trial_id: str
    index: int
    config: dict[str, Any]
    experiment_name: str
    trainable_name: str
    run_dir: str
    placement_group_factory: PlacementGroupFactory
    status: TrialStatus = TrialStatus.PENDING
    last_result: dict[str, Any] | None = None
    num_failures: int = 0
    error: str | None = None
    checkpoint_path: str | None = None
    #: Checkpoints the trial's actor is uploading to object storage, oldest first: (URI, the
    #: iteration and the result each holds), each recorded once a later report or a save confirms it.
    pending_uploads: list[tuple[str, int, dict[str, Any] | None]] = dataclasses.field(default_factory=list)
    #: (iteration, time_total_s) the trial had when it took a donor's checkpoint (a PBT exploit),
    #: until it saves one of its own: a start from the donor's checkpoint sets them back, so the
    #: trial's curve goes on from its own iteration, not the donor's.
    own_progress: tuple[int, float] | None = None
    #: The scheduler's and stopper's view of the last result (nested keys flattened with '/').
    last_flat_result: dict[str, Any] | None = None
    #: What ``trial_name_creator`` and ``trial_dirname_creator`` made of the trial, if given.
    custom_name: str | None = None
    custom_dirname: str | None = None

    @property
    def trial_name(self) -> str:
        return self.custom_name or f"{self.trainable_name}_{self.trial_id}"

    @property
    def trial_dir(self) -> str:
        return os.path.join(self.run_dir, self.custom_dirname or f"{self.trainable_name}_{self.trial_id}")

    @property
    def iteration(self) -> int:
        return int(self.last_result.get("training_iteration", 0)) if self.last_result else 0

    def info(self, prepared: Any = None) -> TrialInfo:
        """What the trial's actor is told of it; ``prepared``: the trainable's ``prepare_trial``
        of the trial's current config."""
        return TrialInfo(
            trial_id=self.trial_id,
            trial_name=self.trial_name,
            trial_dir=self.trial_dir,
            experiment_name=self.experiment_name,
            trial_index=self.index,
            resources=tuple(dict(b) for b in self.placement_group_factory.bundles),
            prepared=prepared,
        )

    def __repr__(self) -> str:
        return f"Trial({self.trial_name}, status={self.status})"
