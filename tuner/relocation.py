"""A sweep whose run directory was moved or copied (``cp -r results/a results/b``).

The store records absolute paths: the run directory, the TensorBoard logdir, each trial's
directory and checkpoints. A run directory holds its own SQLite store, so when the directory
moves the store moves with it and still says ``a``. The rule: the SQLite store in a run
directory belongs to that directory. Its sweep is found under the directory's name (or, when
the store holds exactly one sweep of another name, that one: moved or copied here), and every
path recorded under the old run directory is read as the same path under the new one. Readers
(the query verbs, ``tune.load``) only resolve; the driver that resumes the sweep writes the new
name and paths into the store (:func:`adopt`), so that it checkpoints, and prunes checkpoints,
in its own directory and never in the original's.

A sweep in a shared database (``database_url``) keeps its name and paths: its store does not
move with a directory, and its paths are those of the machine that ran it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

__all__ = ["Relocation", "adopt", "adopt_run_dir", "find_sweep"]


@dataclasses.dataclass(frozen=True)
class Relocation:
    """A run directory moved (or copied) from ``old`` to ``new``, its store with it."""

    old: Path
    new: Path

    def path(self, recorded: str | None) -> str | None:
        """``recorded`` under ``new`` when it was under ``old``, else as it is."""
        if not recorded:
            return recorded
        path = Path(recorded)
        if not path.is_relative_to(self.old):
            return recorded
        return str(self.new / path.relative_to(self.old))

    def spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A stored experiment spec with its run directory and logdir moved."""
        moved = dict(spec)
        for key in ("run_dir", "tensorboard_dir"):
            if isinstance(moved.get(key), str):
                moved[key] = self.path(moved[key])
        return moved


def find_sweep(store: Any, run_dir: Path, *, own_store: bool) -> tuple[dict[str, Any] | None, Relocation | None]:
    """The stored experiment of the sweep in ``run_dir`` and, when the directory was moved or
    copied since, its :class:`Relocation` (the experiment's spec already relocated).

    ``own_store``: ``store`` is the SQLite file in ``run_dir`` (not a shared database). The
    experiment is the one named like ``run_dir``; in its own store only, else the store's only
    experiment. None when there is none (or several, none of that name).
    """
    record = store.get_experiment(run_dir.name)
    if not own_store:
        return record, None
    if record is None:
        experiments = store.list_experiments()
        if len(experiments) != 1:
            return None, None
        record = experiments[0]
    spec = record.get("spec") or {}
    recorded = spec.get("run_dir")
    if not isinstance(recorded, str) or not recorded or Path(recorded) == run_dir:
        return record, None
    relocation = Relocation(Path(recorded), run_dir)
    return {**record, "spec": relocation.spec(spec)}, relocation


def adopt(store: Any, experiment_id: int, name: str, relocation: Relocation) -> None:
    """Write a moved sweep's new place into its store, in one transaction: the experiment takes
    ``name`` (its run directory's) and every path recorded under the old run directory is
    rewritten under the new one. For the driver that resumes the sweep, holding its lock."""
    import sqlalchemy as sa

    from tuner.store import codec
    from tuner.store.schema import checkpoints, experiments, exploits, trials

    store.flush()  # nothing of the store's own writer is left to interleave with this transaction
    with store.engine.begin() as conn:
        spec = codec.decode(conn.execute(sa.select(experiments.c.spec).where(experiments.c.id == experiment_id))
                            .scalar_one())
        conn.execute(experiments.update().where(experiments.c.id == experiment_id)
                     .values(name=name, spec=codec.encode(relocation.spec(spec or {}))))
        for table, key, columns in ((trials, "trial_id", ("trial_dir", "checkpoint_path")),
                                    (checkpoints, "id", ("path",)), (exploits, "id", ("checkpoint_path",))):
            query = sa.select(table.c[key], *(table.c[c] for c in columns)).where(
                table.c.experiment_id == experiment_id)
            for row in conn.execute(query).all():
                moved = {c: relocation.path(v) for c, v in zip(columns, row[1:])}
                if moved != dict(zip(columns, row[1:])):
                    conn.execute(table.update().where(table.c[key] == row[0]).values(**moved))


def adopt_run_dir(store: Any, run_dir: Path, name: str) -> None:
    """Before a resume of the sweep in ``run_dir`` from its own store: when the directory was
    moved or copied there, :func:`adopt` its new name and paths (nothing to do otherwise)."""
    record, relocation = find_sweep(store, run_dir, own_store=True)
    if record is not None and relocation is not None:
        adopt(store, int(record["id"]), name, relocation)
