"""The spec a sweep was started with, kept in its store too (``experiment_state`` key
``cli_spec``), so that ``tuner resume`` works from any machine that reaches a shared store,
without the run directory where ``sweep.yaml`` was saved. A database password is never kept.
A submitted sweep keeps the local modules its spec names as well (``cli_modules``, a zip)."""

from __future__ import annotations

from typing import Any

from tuner.cli.paths import SweepRef, has_password

__all__ = ["MODULES_KEY", "STATE_KEY", "load", "load_modules", "save"]

STATE_KEY = "cli_spec"
#: The local modules a submitted sweep's spec names (a zip), so that a resume ships them from anywhere.
MODULES_KEY = "cli_modules"


def save(url: str, experiment_id: int, document: dict[str, Any]) -> None:
    """Keep ``document`` (YAML) in the sweep's store; the URL of its database is left out when it
    holds a password (the resume then takes ``--database-url``)."""
    from tuner.cli.yaml_io import dump
    from tuner.store import Store, mask_url

    document = dict(document)
    if has_password(document.get("database_url")):
        document["database_url"] = mask_url(document["database_url"])
    with Store(url, create=False) as store:
        store.save_state(experiment_id, STATE_KEY, dump(document).encode("utf-8"))


def load(ref: SweepRef) -> dict[str, Any] | None:
    """The spec kept in ``ref``'s store, or None (none kept, or no such sweep)."""
    import yaml

    from tuner.cli.paths import open_store

    store = open_store(ref)
    try:
        experiment = store.get_experiment(ref.name)
        blob = None if experiment is None else store.load_state(int(experiment["id"]), STATE_KEY)
    finally:
        store.close()
    if blob is None:
        return None
    document = yaml.safe_load(blob.decode("utf-8"))
    return document if isinstance(document, dict) else None


def load_modules(ref: SweepRef) -> bytes | None:
    """The local modules kept in ``ref``'s store at its submission (a zip), or None."""
    from tuner.cli.paths import open_store

    store = open_store(ref)
    try:
        experiment = store.get_experiment(ref.name)
        return None if experiment is None else store.load_state(int(experiment["id"]), MODULES_KEY)
    finally:
        store.close()
