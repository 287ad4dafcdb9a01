"""Hyperparameter tuning for reinforcement learning on Ray.

>>> from tuner import tune
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from schedulers.pbt_replay import set_stored_policy_reader
from tuner.held_out.runner import set_validation_runner

try:
    __version__ = version("tuner-rl")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "export_pbt_policy", "export_tensorboard", "tune"]


def _read_stored_policy(path: Any, trial_id: str, database_url: str | None) -> Any:
    """The schedule of a stored PBT trial, for ``PopulationBasedTrainingReplay(run_dir, trial_id)``."""
    from tuner.pbt_policy import stored_policy

    return stored_policy(path, trial_id, database_url=database_url)


# The replay scheduler lives a layer below the store: it is handed the reader, never imports it.
set_stored_policy_reader(_read_stored_policy)


def _run_validation(analysis: Any, top_k: int, seeds: int, **options: Any) -> Any:
    """Run a sweep's validation (``ExperimentAnalysis.validate``), as a follow-on sweep."""
    from tuner.held_out.run import run_validation

    return run_validation(analysis, top_k, seeds, **options)


# The analysis reads sweeps a layer below where they are run: it is handed the runner, never imports it.
set_validation_runner(_run_validation)


def __getattr__(name: str):  # noqa: ANN202 - lazy: ``import tuner`` stays light
    if name == "export_tensorboard":
        from tuner.tensorboard.rebuild import export_tensorboard

        globals()[name] = export_tensorboard
        return export_tensorboard
    if name == "export_pbt_policy":
        from tuner.pbt_policy import export_pbt_policy

        globals()[name] = export_pbt_policy
        return export_pbt_policy
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")
