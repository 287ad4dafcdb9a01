"""``tune.run``'s arguments as one typed value, carried from the API (``tune.run``, ``tune.Tuner``,
``tuner sweep``) through the checks to the controller.

Adding an argument to ``tune.run`` is: a field here (its default is ``tune.run``'s), the same
keyword in ``tune.run``'s signature (``tests/tuner/test_run_options.py`` holds the two equal), its
check in ``tuner.run_arguments``, and its use. Nothing in between spells the arguments out.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from schedulers.trial_scheduler import TrialScheduler
    from tuner.callback import Callback
    from tuner.search.searcher import Searcher
    from tuner.tune_config import CheckpointConfig

__all__ = ["RunOptions"]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Every keyword of ``tune.run`` (see its docstring for what each means), as given: nothing is
    checked here; ``tuner.run_arguments.validate_arguments`` checks them all before anything is
    written. Once checked, ``tune.run`` carries a copy with its defaults filled in (see
    ``tuner.api._resolve_sweep``)."""

    config: Mapping[str, Any] | None = None
    num_samples: int = 1
    metric: str | None = None
    mode: str | None = None
    scheduler: TrialScheduler | None = None
    search_alg: Searcher | None = None
    stop: Any = None
    time_budget_s: float | None = None
    resources_per_trial: Any = None
    max_concurrent_trials: int | None = None
    cpu_share: float | None = None
    max_failures: int = 0
    checkpoint_freq: int = 0
    checkpoint_at_end: bool = False
    storage_path: str | os.PathLike[str] | None = None
    storage_filesystem: Any = None  # a pyarrow.fs or fsspec filesystem that storage_path is a folder of
    database_url: str | None = None
    name: str | None = None
    seed: int | None = None
    verbose: int = 1
    raise_on_failed_trial: bool = True
    resume: bool | str = False
    callbacks: Sequence[Callback] | None = None
    tensorboard: bool = True
    tensorboard_dir: str | os.PathLike[str] | None = None
    checkpoint_config: CheckpointConfig | None = None
    keep_checkpoints_num: int | None = None
    checkpoint_score_attr: str | None = None
    fail_fast: bool | str = False
    reuse_actors: bool | None = None
    pack_trials: bool | int | str = "auto"
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> RunOptions:
        """The options among ``arguments`` (``tune.run``'s ``locals()``: its other parameters are
        left out); one missing from ``arguments`` is a KeyError, a bug in the caller."""
        return cls(**{field.name: arguments[field.name] for field in dataclasses.fields(cls)})
