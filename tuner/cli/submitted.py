"""A submitted sweep is in its store before ``tuner submit`` returns.

``tuner submit`` (and ``tuner resume --submit``) record the sweep as SUBMITTED, with its Ray Job's
id and address and who submitted it, before the job is handed to the cluster: every verb it prints
(``ls``, ``show``, ``logs``, ``stop``) works the moment it is printed, minutes before the job's
driver has started. The driver takes the record over (``tune.run`` adopts a SUBMITTED record of its
own job id as its new sweep). A submission that fails takes its record back; a job stopped before
its driver started leaves no sweep behind (see :func:`settle_stopped`).
"""

from __future__ import annotations

from typing import Any

from tuner.cli.paths import SweepRef
from tuner.sweep_status import SweepStatus

__all__ = ["placeholder_spec", "record", "settle_stopped", "take_back"]


def placeholder_spec(ref: SweepRef, document: dict[str, Any], planned_trials: int | None) -> dict[str, Any]:
    """What the store shows of a submitted sweep until its driver writes its own spec."""
    from tuner.store import mask_url

    return {"trainable": str(document.get("trainable", "")), "run_dir": str(ref.run_dir),
            "database_url": mask_url(ref.url), "num_samples": document.get("num_samples", 1),
            "planned_trials": planned_trials, "submitted": True}


def record(ref: SweepRef, *, job_id: str, address: str, owner: str, document: dict[str, Any],
           metric: str | None, mode: str | None, planned_trials: int | None,
           modules: bytes) -> dict[str, Any] | None:
    """Record sweep ``ref`` as SUBMITTED as job ``job_id``, with the local ``modules`` shipped with
    it (a zip); what the record was before (None: it is new), for :func:`take_back`. A new SQLite
    file is made (as ``tuner sweep`` makes it)."""
    from tuner.cli import stored_spec
    from tuner.store import Store

    with Store(ref.url) as store:
        before = store.get_experiment(ref.name)
        if before is None:
            experiment_id = store.get_or_create_experiment(
                ref.name, spec=placeholder_spec(ref, document, planned_trials), metric=metric, mode=mode,
                status=SweepStatus.SUBMITTED)
        else:
            experiment_id = int(before["id"])
            store.set_experiment_status(experiment_id, SweepStatus.SUBMITTED)
        store.update_experiment(experiment_id, owner=owner, job_id=job_id, job_address=address)
        store.save_state(experiment_id, stored_spec.MODULES_KEY, modules)
        store.flush()
    if before is None:  # `tuner resume --submit` from any machine, should the job never start
        stored_spec.save(ref.url, experiment_id, document)
    return before


def take_back(ref: SweepRef, job_id: str, before: dict[str, Any] | None) -> None:
    """Undo :func:`record` after a submission that failed: a new sweep's record goes, a resumed
    one gets its status and job back (unless its job's driver has taken it over meanwhile)."""
    from tuner.store import Store

    with Store(ref.url, create=False) as store:
        now = store.get_experiment(ref.name)
        if now is None or now.get("job_id") != job_id or now.get("status") != SweepStatus.SUBMITTED:
            return
        experiment_id = int(now["id"])
        if before is None:
            store.delete_experiment(experiment_id)
            return
        store.set_experiment_status(experiment_id, str(before["status"]))
        store.update_experiment(experiment_id, job_id=before.get("job_id"), job_address=before.get("job_address"),
                                owner=before.get("owner"))
        store.flush()


def settle_stopped(ref: SweepRef, job_id: str) -> str | None:
    """After job ``job_id`` ended: a record still SUBMITTED by it was never taken over by its
    driver. A sweep that never ran goes from the store (the line saying so is returned); one that
    ran before (a resume) is INTERRUPTED again. None when the driver had taken the record over."""
    from tuner.store import Store

    with Store(ref.url, create=False) as store:
        experiment = store.get_experiment(ref.name)
        if experiment is None or experiment.get("status") != SweepStatus.SUBMITTED or \
                experiment.get("job_id") != job_id:
            return None
        experiment_id = int(experiment["id"])
        if store.trials(experiment_id):
            store.set_experiment_status(experiment_id, SweepStatus.INTERRUPTED)
            store.flush()
            return None
        store.delete_experiment(experiment_id)
    return f"sweep {ref.name} was stopped before its driver started: nothing ran, and it is no longer stored"
