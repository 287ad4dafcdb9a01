"""``trial_name_creator`` and ``trial_dirname_creator``: user-chosen names of trials and their directories."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

from tuner.execution.trial import Trial

logger = logging.getLogger(__name__)


def check_creator(creator: Any, field: str) -> None:
    """Raise a ValueError naming ``field`` unless ``creator`` is None or a callable."""
    if creator is not None and not callable(creator):
        raise ValueError(f"{field} must be a function of a trial returning a string, got {type(creator).__name__}")


class TrialNamer:
    """Names trials with the user's creators (Ray Tune's semantics: the name is what progress
    output and TensorBoard show; the directory name, default ``<trainable>_<trial_id>``, is where
    the trial's checkpoints go). Names and directories stay unique within a sweep: a creator that
    repeats itself gets ``_<trial_id>`` appended, with a warning."""

    def __init__(
        self,
        name_creator: Callable[[Trial], str] | None = None,
        dirname_creator: Callable[[Trial], str] | None = None,
    ) -> None:
        check_creator(name_creator, "trial_name_creator")
        check_creator(dirname_creator, "trial_dirname_creator")
        self._name_creator = name_creator
        self._dirname_creator = dirname_creator
        self._names: set[str] = set()
        self._dirnames: set[str] = set()

    def __bool__(self) -> bool:
        return self._name_creator is not None or self._dirname_creator is not None

    def __call__(self, trial: Trial) -> None:
        """Give ``trial`` its custom name and directory name."""
        if self._name_creator is not None:
            trial.custom_name = self._unique(self._make(self._name_creator, trial, "trial_name_creator"),
                                             trial, self._names, "trial_name_creator")
        if self._dirname_creator is not None:
            name = self._make(self._dirname_creator, trial, "trial_dirname_creator")
            if os.sep in name or (os.altsep and os.altsep in name) or name in (".", ".."):
                raise ValueError(f"trial_dirname_creator must return a directory name, not a path: got {name!r}")
            trial.custom_dirname = self._unique(name, trial, self._dirnames, "trial_dirname_creator")

    @staticmethod
    def _make(creator: Callable[[Trial], str], trial: Trial, field: str) -> str:
        name = creator(trial)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{field} must return a non-empty string, got {name!r} for trial {trial.trial_id}")
        return name

    @staticmethod
    def _unique(name: str, trial: Trial, taken: set[str], field: str) -> str:
        if name in taken:
            logger.warning("%s returned %r for two trials; trial %s gets %r", field, name, trial.trial_id,
                           f"{name}_{trial.trial_id}")
            name = f"{name}_{trial.trial_id}"
        taken.add(name)
        return name


__all__ = ["TrialNamer", "check_creator"]
