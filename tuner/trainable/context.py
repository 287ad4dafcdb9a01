"""What a running trial knows about itself: ``tune.get_context()``."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class TrialInfo:
    """Identity of a trial, handed to its trainable inside the trial actor."""

    trial_id: str
    trial_name: str
    trial_dir: str
    experiment_name: str
    trial_index: int = 0
    resources: tuple[dict[str, float], ...] = ()
    #: What the trainable's ``prepare_trial`` worked out in the driver for this trial's config.
    prepared: Any = dataclasses.field(default=None, repr=False, compare=False)
    #: The sweep's object storage (a :class:`tuner.storage.Storage`) and the trial's folder there
    #: (a URI), where its checkpoints go from this node; None: the sweep's storage is a folder.
    storage: Any = dataclasses.field(default=None, repr=False, compare=False)
    storage_dir: str | None = None
    #: A sweep in a plain folder on a cluster of several nodes: the actor that keeps its
    #: checkpoints on the driver's node, and that node's id (see ``tuner.storage.keeper``).
    keeper: Any = dataclasses.field(default=None, repr=False, compare=False)
    driver_node: str | None = None


class TrainContext:
    """Returned by ``tune.get_context()`` inside a trial (Ray Tune's TuneContext names)."""

    def __init__(self, info: TrialInfo) -> None:
        self._info = info

    def get_trial_id(self) -> str:
        return self._info.trial_id

    def get_trial_name(self) -> str:
        return self._info.trial_name

    def get_trial_dir(self) -> str:
        return self._info.trial_dir

    def get_experiment_name(self) -> str:
        return self._info.experiment_name

    def get_trial_resources(self) -> list[dict[str, float]]:
        return [dict(b) for b in self._info.resources]

    def __repr__(self) -> str:
        fields: dict[str, Any] = {f.name: getattr(self._info, f.name) for f in dataclasses.fields(self._info) if f.repr}
        return f"TrainContext({fields})"
