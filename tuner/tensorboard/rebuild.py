"""Rebuild a sweep's HParams logdir from its SQL store alone (a sweep run elsewhere, logs deleted)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedulers.trial_status import ENDED, TrialStatus
from tuner.store import Store, default_database_url
from tuner.tensorboard.exporter import TensorBoardExporter

#: Where ``tune.run`` puts a sweep without ``storage_path`` (``tuner.api.DEFAULT_STORAGE_PATH``).
_DEFAULT_STORAGE_PATH = "~/tuner_results"


def _run_dir_and_name(name_or_path: str | os.PathLike[str]) -> tuple[Path, str]:
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if isinstance(name_or_path, os.PathLike) or os.sep in text or (os.altsep and os.altsep in text) or path.is_dir():
        run_dir = path.absolute()
        return run_dir, run_dir.name
    return Path(_DEFAULT_STORAGE_PATH).expanduser().absolute() / text, text


def export_tensorboard(
    name_or_path: str | os.PathLike[str],
    *,
    database_url: str | None = None,
    logdir: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the TensorBoard HParams logdir of a stored sweep from its store; returns the logdir.

    ``name_or_path`` is the sweep's run directory (``storage_path/name``, holding ``tuner.db``) or,
    with ``database_url``, its name (a bare name without ``database_url`` is looked for under
    ``~/tuner_results``). ``logdir`` defaults to ``<run_dir>/tensorboard``, where ``tune.run``
    exports; an existing non-empty logdir is only replaced with ``overwrite=True`` (the new one is
    built aside and swapped in). The sessions, hparam values, curves, statuses and the experiment
    summary are those the live export writes: trials that started, their first config (before any
    PBT exploit), every stored result, and a session end for those that ended.

    Example:
        >>> import tuner
        >>> tuner.export_tensorboard("~/tuner_results/ppo_sweep")       # doctest: +SKIP
        PosixPath('/home/me/tuner_results/ppo_sweep/tensorboard')
    """
    _check_arguments(name_or_path, database_url, logdir, overwrite)
    run_dir, _ = _run_dir_and_name(name_or_path)
    own_store = database_url is None
    if database_url is None:
        database_url = _database_url_of(run_dir)
    target = _target_logdir(run_dir, logdir, overwrite)
    sweep = _read_sweep(database_url, run_dir, own_store)
    _write_logdir(target, sweep)
    return target


def _check_arguments(
    name_or_path: Any, database_url: Any, logdir: Any, overwrite: Any,
) -> None:
    if not isinstance(name_or_path, (str, os.PathLike)) or not os.fspath(name_or_path):
        raise ValueError(f"name_or_path must be a sweep's run directory or name, got {name_or_path!r}")
    if database_url is not None and (not isinstance(database_url, str) or not database_url):
        raise ValueError(f"database_url must be a database URL string or None, got {database_url!r}")
    if logdir is not None and (not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir)):
        raise ValueError(f"logdir must be a path (str or os.PathLike) or None, got {logdir!r}")
    if not isinstance(overwrite, bool):
        raise ValueError(f"overwrite must be True or False, got {overwrite!r}")


def _database_url_of(run_dir: Path) -> str:
    """The URL of the SQLite store ``tune.run`` keeps in ``run_dir``; an error when there is none."""
    if not (run_dir / "tuner.db").exists():
        raise ValueError(
            f"name_or_path: no sweep at {run_dir} (no tuner.db there); pass the sweep's run "
            f"directory, or its name and database_url"
        )
    return default_database_url(run_dir)


def _target_logdir(run_dir: Path, logdir: str | os.PathLike[str] | None, overwrite: bool) -> Path:
    target = Path(logdir).expanduser().absolute() if logdir is not None else run_dir / "tensorboard"
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise ValueError(f"logdir: {target} exists and is not empty; pass overwrite=True to replace it")
    return target


@dataclass
class _StoredSweep:
    """What the export needs of a sweep, read in one go so that the store is closed before writing."""

    experiment: dict[str, Any]
    trials: list[dict[str, Any]]
    histories: dict[Any, list[dict[str, Any]]]
    exploits: list[dict[str, Any]]


def _read_sweep(database_url: str, run_dir: Path, own_store: bool) -> _StoredSweep:
    from tuner.relocation import find_sweep

    store = Store(database_url, create=False)
    try:
        experiment, _ = find_sweep(store, run_dir, own_store=own_store)
        if experiment is None:
            raise ValueError(f"name_or_path: no sweep named {run_dir.name!r} in the store {store.url_for_display}")
        experiment_id = int(experiment["id"])
        trials = store.trials(experiment_id)
        histories = {row["trial_id"]: store.results(experiment_id, trial_id=row["trial_id"]) for row in trials}
        exploits = store.exploits(experiment_id) if hasattr(store, "exploits") else []
    finally:
        store.close()
    return _StoredSweep(experiment, trials, histories, exploits)


def _write_logdir(target: Path, sweep: _StoredSweep) -> None:
    """Export ``sweep`` into a staging directory beside ``target``, then swap it in for ``target``."""
    spec = sweep.experiment.get("spec") or {}
    domains = spec.get("hparam_domains")
    first_config: dict[str, Any] = {}
    for exploit in sweep.exploits:  # oldest first: a trial's first exploit holds the config it started with
        first_config.setdefault(exploit["trial_id"], exploit["old_config"])
    trainable = spec.get("trainable") or "trial"

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.rebuild-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        exporter = TensorBoardExporter(staging, hparam_domains=domains if isinstance(domains, list) else None)
        exporter.begin(metric=sweep.experiment.get("metric"), time_created=sweep.experiment.get("created_at"),
                       live=False)
        for row in sweep.trials:
            _export_trial(exporter, row, sweep.histories.get(row["trial_id"], []), trainable, first_config)
        exporter.close()
        if target.exists():
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink()
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _export_trial(
    exporter: TensorBoardExporter, row: dict[str, Any], history: list[dict[str, Any]], trainable: str,
    first_config: dict[str, Any],
) -> None:
    """One trial's session: its first config, every stored result, and its end if it ended."""
    status = row["status"]
    if not history and status not in (TrialStatus.RUNNING, TrialStatus.PAUSED, TrialStatus.ERROR) and not row.get("num_failures"):
        return  # never started (or no way to tell): the live export has no session either
    name_in_logdir = f"{trainable}_{row['trial_id']}"
    exporter.start_session(name_in_logdir, first_config.get(row["trial_id"], row["config"]),
                           start_time=_start_time(row, history))
    for result in history:
        exporter.add_result(name_in_logdir, result)
    if status in ENDED:
        exporter.end_session(name_in_logdir, "success" if status == TrialStatus.TERMINATED else "failure",
                             end_time=row.get("updated_at"))


def _start_time(row: dict[str, Any], history: list[dict[str, Any]]) -> float | None:
    if history:
        first = history[0]
        stamp, total = first.get("timestamp"), first.get("time_total_s")
        if isinstance(stamp, (int, float)) and isinstance(total, (int, float)):
            return float(stamp) - float(total)
    created = row.get("created_at")
    return float(created) if isinstance(created, (int, float)) else None
