"""The function that runs a sweep's validation, handed to the layer that reads sweeps.

``ExperimentAnalysis.validate`` reads a sweep a layer below where sweeps are run
(``tuner.held_out.run`` runs one through ``tuner.api``, which returns an ``ExperimentAnalysis``):
``tuner/__init__.py`` hands it the runner, as it hands the PBT replay scheduler its policy reader.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["set_validation_runner", "validation_runner"]

_runner: Callable[..., Any] | None = None


def set_validation_runner(runner: Callable[..., Any]) -> None:
    """Make ``runner(analysis, top_k, seeds, **options)`` the one ``ExperimentAnalysis.validate`` calls."""
    global _runner
    _runner = runner


def validation_runner() -> Callable[..., Any]:
    """The runner ``tuner`` registered at import."""
    if _runner is None:
        raise RuntimeError("validate: no validation runner is registered; import tuner first")
    return _runner
