"""What a new sweep that fails its checks leaves behind: nothing, so the corrected call can reuse its name."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.store import Store

if TYPE_CHECKING:
    from tuner.execution.controller import Controller

__all__ = ["Leftovers", "nothing_to_keep"]

# tune.run's logger: the warning is about the call that failed.
logger = logging.getLogger("tuner.api")


def nothing_to_keep(exc: BaseException, existing: dict[str, Any] | None, experiment_id: int | None,
                    controller: Controller | None) -> bool:
    """Whether a sweep this call began failed before it had anything worth keeping: before it
    was in the store, or on a check (a ValueError: resources, trainer config, metric) before
    any trial reported. An interrupted sweep is kept: it is resumable."""
    if existing is not None:
        return False
    if experiment_id is None:
        return True
    if not isinstance(exc, ValueError):
        return False
    return controller is None or not any(t.last_result for t in controller.get_trials())


class Leftovers:
    """What a new sweep made (its run directory, TensorBoard logdir, experiment row), so that a
    sweep that fails its checks leaves nothing behind."""

    def __init__(self, run_dir: Path, tb_dir: Path | None, *, in_database: bool) -> None:
        self.run_dir = run_dir if _holds_only_locks(run_dir) else None
        self.tb_dir = tb_dir if tb_dir is not None and not tb_dir.exists() else None
        self.in_database = in_database  # the sweep's rows live outside its run directory
        self.discard = False

    def remove_experiment(self, store: Store, experiment_id: int | None) -> None:
        if experiment_id is None or not (self.in_database or self.run_dir is None):
            return  # nothing stored, or stored in a file removed with the run directory
        try:
            store.delete_experiment(experiment_id)
        except Exception:  # noqa: BLE001 - the error that ended the sweep is the one to raise
            logger.warning("could not remove the failed sweep from the store", exc_info=True)

    def remove_files(self) -> None:
        import shutil

        for path in (self.tb_dir, self.run_dir):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


def _holds_only_locks(run_dir: Path) -> bool:
    """Whether ``run_dir`` is new: missing, or holding nothing but the driver's lock files."""
    try:
        return all(entry.name.endswith(".lock") for entry in run_dir.iterdir())
    except FileNotFoundError:
        return True
    except OSError:
        return False
