"""What a new sweep that fails its checks leaves behind: nothing, so the corrected call can reuse its name."""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.store import Store

if TYPE_CHECKING:
    from tuner.execution.controller import Controller

__all__ = ["ENGINE_FILES", "Leftovers", "nothing_to_keep", "remove_if_only_engine_files", "user_file_in"]

#: What the engine itself writes into a sweep's directories before any trial has a result: the
#: driver's lock files, the SQLite store, the saved spec and TensorBoard's event files (which hold
#: no curve until a result comes). Anything else (a checkpoint, a trial's own output) is not ours
#: to delete.
ENGINE_FILES = ("*.lock", "tuner.db", "tuner.db-wal", "tuner.db-shm", "tuner.db-journal", "sweep.yaml", "*.tmp",
                "events.out.tfevents.*")

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
        for path in (self.tb_dir, self.run_dir):
            if path is not None:
                remove_if_only_engine_files(path)


def user_file_in(directory: Path, engine_files: tuple[str, ...] = ENGINE_FILES) -> Path | None:
    """A file under ``directory`` whose name matches none of ``engine_files`` (by default what the
    engine makes before results exist), or None when there is none. An unreadable folder counts
    as one."""
    try:
        for root, _dirs, files in os.walk(directory, onerror=_raise):
            for name in files:
                if not any(fnmatch.fnmatch(name, pattern) for pattern in engine_files):
                    return Path(root) / name
    except OSError as exc:
        return Path(exc.filename or directory)
    return None


def _raise(exc: OSError) -> None:
    raise exc


def remove_if_only_engine_files(
    directory: Path, engine_files: tuple[str, ...] = ENGINE_FILES, *, say_kept: bool = True,
) -> bool:
    """Remove ``directory`` when all it holds is ``engine_files`` (by default what the engine
    writes before any result), True; otherwise keep all of it, say why (with ``say_kept``), and
    return False: a failure path never deletes a checkpoint, a log or anything else a user may need."""
    if not directory.exists():
        return True
    kept = user_file_in(directory, engine_files)
    if kept is not None:
        if say_kept:
            logger.warning("kept %s: it holds %s, which the failed sweep may need", directory, kept)
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return True


def _holds_only_locks(run_dir: Path) -> bool:
    """Whether ``run_dir`` is new: missing, or holding nothing but the driver's lock files."""
    try:
        return all(entry.name.endswith(".lock") for entry in run_dir.iterdir())
    except FileNotFoundError:
        return True
    except OSError:
        return False
