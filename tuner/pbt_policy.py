"""A stored PBT trial's schedule of configs: Ray Tune's PBT policy, traced from our store.

The store keeps every exploit (``exploits``: the trial, the donor, the trial's iteration, its
old and new config, the donor checkpoint it restored) and every checkpoint (``checkpoints``: the
trial that saved it and the iteration it covers). A trial keeps its own iteration count across
an exploit, so the weights it ends with were trained by a lineage: its own steps since its last
exploit, before that the steps of the trial whose checkpoint it took, and so on back. The
schedule replays that lineage, counted in steps of those weights (``training_iteration`` of a
trial that never exploits):

- ``age(X, c)``, the steps behind trial X's state after its own iteration ``c``: ``c`` when X
  had not exploited before ``c``; else, with its last exploit before ``c`` at its iteration ``a``
  from a checkpoint saved by trial O at O's iteration ``o``, ``age(O, o) + c - a``;
- the schedule of X up to ``c`` is O's schedule up to ``o``, then a change to the exploit's new
  config at ``age(O, o)``; with no exploit before ``c``, X's own initial config throughout.

The result is written as Ray Tune's policy records ``[old_tag, new_tag, old_step, new_step,
old_config, new_config]`` (tags are trial ids; ``new_step`` is the age; ``old_config`` is the
config that trained the donor's checkpoint), so that ``export_pbt_policy`` writes a file Ray Tune's
``PopulationBasedTrainingReplay`` reads the same way, and one reading gives the policy here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from schedulers.pbt_replay import PBTPolicy, policy_from_records

__all__ = ["export_pbt_policy", "policy_records", "stored_policy"]

_OWNER = "PopulationBasedTrainingReplay"


def policy_records(
    trial_id: str,
    *,
    initial_configs: dict[str, dict[str, Any]],
    exploits: Sequence[dict[str, Any]],
    checkpoints: Sequence[dict[str, Any]],
    results: dict[str, Sequence[dict[str, Any]]] | None = None,
) -> list[list[Any]]:
    """The PBT policy records of ``trial_id``'s last weights, oldest first (empty: it never exploited).

    ``initial_configs``: each trial's config before any exploit; ``exploits`` and ``checkpoints``:
    the store's rows, oldest first; ``results``: each trial's results, used only to date a donor
    checkpoint the checkpoints table does not hold (the donor's last iteration before the exploit).
    """
    by_trial: dict[str, list[dict[str, Any]]] = {}
    for row in exploits:
        by_trial.setdefault(row["trial_id"], []).append(row)
    saved_by = {row["path"]: (row["trial_id"], int(row["iteration"])) for row in checkpoints}
    limit = len(exploits) + 1  # every step back goes to an earlier exploit: more would be a loop

    def before(trial: str, iteration: float) -> dict[str, Any] | None:
        rows = [r for r in by_trial.get(trial, ()) if r["iteration"] < iteration]
        return rows[-1] if rows else None

    def owner(row: dict[str, Any]) -> tuple[str, int]:
        found = saved_by.get(row.get("checkpoint_path") or "")
        if found is not None:
            return found
        donor = row["donor_trial_id"]
        dated = [int(r["training_iteration"]) for r in (results or {}).get(donor, ())
                 if float(r.get("timestamp", 0.0)) <= float(row["timestamp"])]
        return donor, max(dated, default=0)

    def config_at(trial: str, iteration: int) -> dict[str, Any]:
        row = before(trial, iteration)
        return row["new_config"] if row is not None else initial_configs[trial]

    def age(trial: str, iteration: int, depth: int = 0) -> int:
        row = before(trial, iteration)
        if row is None:
            return iteration
        if depth > limit:
            raise ValueError(f"the stored exploits of trial {trial!r} loop back on themselves")
        donor, donor_iteration = owner(row)
        return age(donor, donor_iteration, depth + 1) + iteration - int(row["iteration"])

    records: list[list[Any]] = []
    trial, iteration = trial_id, float("inf")
    while (exploit := before(trial, iteration)) is not None:
        if len(records) > limit:
            raise ValueError(f"the stored exploits of trial {trial_id!r} loop back on themselves")
        donor, donor_iteration = owner(exploit)
        records.append([trial, donor, int(exploit["iteration"]), age(donor, donor_iteration),
                        config_at(donor, donor_iteration), exploit["new_config"]])
        trial, iteration = donor, donor_iteration
    return records[::-1]


def _sweep_records(path: str | os.PathLike[str], trial_id: str, database_url: str | None) -> list[list[Any]]:
    from tuner.analysis import ExperimentAnalysis
    from tuner.errors import TuneError
    from tuner.store import NoSchemaError

    try:
        analysis = ExperimentAnalysis(path, database_url=database_url)
    except (TuneError, NoSchemaError) as exc:
        raise ValueError(f"{_OWNER}: policy_file {os.fspath(path)!r} is no stored sweep: {exc}") from None
    with analysis:
        trials = {t.trial_id: t for t in analysis.trials}
        if trial_id not in trials:
            known = ", ".join(sorted(trials)[:8]) + (", ..." if len(trials) > 8 else "")
            raise ValueError(f"{_OWNER}: trial_id {trial_id!r} is not a trial of sweep {analysis.name!r} "
                             f"(its trials: {known or 'none'})")
        exploits = analysis.exploits
        initial = {tid: t.config for tid, t in trials.items()}
        for row in reversed(exploits):  # a trial's first exploit holds the config it started with
            initial[row["trial_id"]] = row["old_config"]
        if not any(row["trial_id"] == trial_id for row in exploits):
            raise ValueError(f"{_OWNER}: trial_id {trial_id!r} never exploited in sweep {analysis.name!r} "
                             f"({len(exploits)} exploits stored): its config never changed, so there is no "
                             f"schedule to replay; run its config directly: {trials[trial_id].config!r}")
        checkpoints = analysis.checkpoints(include_deleted=True)
        known_paths = {row["path"] for row in checkpoints}
        results: dict[str, Sequence[dict[str, Any]]] | None = None
        if any(row["checkpoint_path"] not in known_paths for row in exploits):
            results = {tid: analysis.trial_results(tid) for tid in trials}
        return policy_records(trial_id, initial_configs=initial, exploits=exploits, checkpoints=checkpoints,
                              results=results)


def stored_policy(
    path: str | os.PathLike[str], trial_id: str, *, database_url: str | None = None
) -> PBTPolicy:
    """The config schedule of trial ``trial_id`` of the sweep stored at ``path`` (its run directory;
    with ``database_url``, the sweep of that name in that database). A ValueError names the
    argument when there is no such sweep or trial, or the trial never exploited."""
    return policy_from_records(_sweep_records(path, trial_id, database_url))


def export_pbt_policy(
    path: str | os.PathLike[str],
    trial_id: str,
    policy_file: str | os.PathLike[str] | None = None,
    *,
    database_url: str | None = None,
) -> Path:
    """Write trial ``trial_id``'s schedule as a Ray Tune PBT policy file (JSON lines) and return
    its path: ``policy_file``, or ``pbt_policy_<trial_id>.txt`` in the sweep's run directory.
    ``PopulationBasedTrainingReplay`` (ours or Ray Tune's) replays it."""
    records = _sweep_records(path, trial_id, database_url)
    out = Path(policy_file) if policy_file is not None else Path(path) / f"pbt_policy_{trial_id}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    return out
