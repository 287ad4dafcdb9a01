"""Ctrl-C and SIGTERM leave a resumable sweep (or, before the sweep started, nothing at all).

On a KeyboardInterrupt or SIGTERM the controller stops its trials' actors and records the trials
that were running, and the sweep, as INTERRUPTED; a resume (``tune.run(..., resume=True)``,
``tuner resume``) continues them from their last checkpoint, as after a driver that died. The
CLI marks the sweep INTERRUPTED too, for an interrupt that came before the controller ran, so
``tuner ls`` and ``tuner show`` say what happened.
"""

from __future__ import annotations

from pathlib import Path

from tuner.cli.paths import SPEC_FILE
from tuner.sweep_status import SweepStatus


def mark_interrupted(url: str, name: str) -> bool:
    """Record that sweep ``name`` was interrupted (a resume sets it RUNNING again); False when
    the sweep was not in the store yet (interrupted before it started) or the store is unreadable."""
    from tuner.store import Store

    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return False  # do not create an empty database file
    try:
        store = Store(url, create=False)
    except Exception:  # noqa: BLE001 - nothing to mark in a store that cannot be opened
        return False
    try:
        experiment = store.get_experiment(name)
        if experiment is None or experiment.get("status") == SweepStatus.SUBMITTED:  # its driver never took it over
            return False
        store.set_experiment_status(int(experiment["id"]), SweepStatus.INTERRUPTED)
        store.flush()
        return True
    finally:
        store.close()


def discard_unstarted(run_dir: Path, url: str, name: str) -> None:
    """Remove a run directory this process created for a sweep that never got into its store
    (Ctrl-C or an error while Ray was starting): nothing half-made is left behind. Only what is
    provably unstarted goes: a sweep whose spec file was written (it was in its store) or whose
    store holds it keeps everything, and so does a store file that is gone (removed mid-sweep)
    from a directory holding more than lock files. The store is decided from its files first:
    opening a database that just failed is not safe (see ``FileIdentity.refuse_abandoned``)."""
    from tuner.execution.leftovers import remove_if_only_engine_files
    from tuner.store import NoSchemaError, Store

    if not run_dir.is_dir() or (run_dir / SPEC_FILE).exists():  # the spec is written once the sweep is stored
        return
    if not (run_dir / "tuner.db").exists():  # gone: only a directory of lock files is provably unstarted
        remove_if_only_engine_files(run_dir, ("*.lock",), say_kept=False)
        return
    try:
        store = Store(url, create=False)
    except NoSchemaError:  # a database whose tables were never made: the sweep is not in it
        store = None
    except Exception:  # noqa: BLE001 - a store that cannot be read proves nothing: keep it all
        return
    if store is not None:
        try:
            if store.get_experiment(name) is not None:
                return
        except Exception:  # noqa: BLE001 - unreadable (the failure that ended the sweep): keep it all
            return
        finally:
            store.close()
    remove_if_only_engine_files(run_dir, say_kept=False)
