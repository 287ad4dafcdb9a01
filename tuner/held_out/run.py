"""Run (or resume) a sweep's validation. It runs as ``tuner sweep`` runs a spec
(its spec saved, so ``tuner resume NAME`` and ``tuner resume NAME --submit`` continue it); asked
again, a finished validation is only read, an unfinished one resumed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

from tuner.held_out.plan import (
    ValidationPlan,
    check_request,
    held_out_seeds,
    pick_candidates,
    used_seeds,
    validation_document,
)
from tuner.held_out.link import LinkValidation, load_plan, load_report
from tuner.held_out.report import ValidationReport, make_report

__all__ = ["base_document", "plan_validation", "run_validation", "stored_spec_of", "validation_name"]


def validation_name(sweep: str) -> str:
    """The default name of sweep ``sweep``'s validation."""
    return f"{sweep}-validation"


def plan_validation(analysis: Any, top_k: int, seeds: int, metric: str | None = None) -> ValidationPlan:
    """The plan of validating ``analysis``'s sweep: its ``top_k`` best configs by ``metric``
    (default: the sweep's), each on ``seeds`` seeds none of its trials used."""
    check_request(top_k, seeds)
    metric, mode = analysis._metric_mode(metric, None)  # noqa: SLF001 - the sweep's defaults, checked
    trials = analysis.trials
    candidates = pick_candidates(trials, metric, mode, int(top_k))
    return ValidationPlan(sweep=analysis.name, metric=metric, mode=mode, candidates=tuple(candidates),
                          seeds=tuple(held_out_seeds(used_seeds(trials), int(seeds))))


def base_document(analysis: Any, stored_document: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the validation takes from the sweep: its ``tuner sweep`` spec, or, for a sweep started
    from Python, its trainable's name, stop and resources as the store recorded them (a ValueError
    saying what to give when they are not plain data)."""
    if stored_document is not None:
        return dict(stored_document)
    spec = analysis.spec
    document: dict[str, Any] = {"trainable": spec.get("trainable_ref") or spec.get("trainable")}
    if not spec.get("trainable_ref"):
        from tuner.registry import get_trainable

        try:
            get_trainable(str(document["trainable"]))
        except ValueError:
            raise ValueError(f"validate: the sweep's trainable {document['trainable']!r} was defined in a script, so "
                             f"it cannot be found by name: register it first, tune.register_trainable("
                             f"{document['trainable']!r}, {document['trainable']})") from None
    for key, field in (("stop", "stop"), ("resources", "resources_per_trial")):
        text = spec.get(field)
        try:
            value = ast.literal_eval(text) if isinstance(text, str) else text
        except (ValueError, SyntaxError):
            raise ValueError(f"validate: the sweep's {field} ({text}) is not plain data; pass "
                             f"{'stop' if key == 'stop' else 'resources_per_trial'}=... to validate()") from None
        if value is not None:
            document[key] = value
    for key in ("max_concurrent_trials", "cpu_share", "max_failures"):
        if spec.get(key) is not None:
            document[key] = spec[key]
    return document


def stored_spec_of(analysis: Any) -> dict[str, Any] | None:
    """The ``tuner sweep`` spec of ``analysis``'s sweep: its saved ``sweep.yaml``, else the copy in
    its store; None for a sweep started from Python."""
    from tuner.cli.paths import SweepRef, read_saved_spec
    from tuner.cli.stored_spec import load

    run_dir = Path(analysis.experiment_path)
    return read_saved_spec(run_dir) or load(SweepRef(analysis.name, run_dir, analysis.database_url))


def existing_validation(url: str, name: str, sweep: str) -> ValidationPlan | None:
    """The plan of validation ``name`` when it is in the store at ``url`` already (None: it is not);
    a ValueError when a sweep of that name is there and is not a validation of ``sweep``."""
    from tuner.store import NoSchemaError, Store, StoreError

    try:
        store = Store(url, create=False)
    except (NoSchemaError, StoreError):
        return None
    try:
        experiment = store.get_experiment(name)
        if experiment is None:
            return None
        plan = load_plan(store, int(experiment["id"]))
    finally:
        store.close()
    if plan is None or plan.sweep != sweep:
        raise ValueError(f"name: a sweep named {name!r} exists and is not a validation of sweep {sweep!r}; "
                         f"pick another name")
    return plan


def run_validation(analysis: Any, top_k: int, seeds: int, *, name: str | None = None, metric: str | None = None,
                   stored_document: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None,
                   callbacks: Any = (), verbose: int = 0) -> ValidationReport:
    """Validate ``analysis``'s sweep (see :meth:`tuner.analysis.ExperimentAnalysis.validate`):
    run, resume or only read its validation sweep, and return the report."""
    from tuner.api import run_sweep
    from tuner.cli import spec as spec_mod
    from tuner.cli.errors import SpecError
    from tuner.cli.paths import SweepRef
    from tuner.cli.sweep_cmd import SaveSpec
    from tuner.run_options import RunOptions
    from tuner.storage.location import is_uri

    check_request(top_k, seeds)
    if stored_document is None:
        stored_document = stored_spec_of(analysis)
    name = name or validation_name(analysis.name)
    database_url = analysis.database_url
    base = base_document(analysis, stored_document)
    base.update(overrides or {})
    if not is_uri(base.get("storage_path")):
        base["storage_path"] = str(Path(analysis.experiment_path).parent)
    base["database_url"] = database_url
    ref_url = SweepRef(name, Path(str(base["storage_path"])) / name, database_url).url
    plan = existing_validation(ref_url, name, analysis.name)
    if plan is not None and (len(plan.seeds) != int(seeds) or len(plan.candidates) > int(top_k)):
        raise ValueError(f"name: validation {name!r} holds {len(plan.candidates)} config(s) on {len(plan.seeds)} "
                         f"seed(s), not top_k={top_k}, seeds={seeds}; pick another name")
    resume = plan is not None
    plan = plan or plan_validation(analysis, top_k, seeds, metric)
    document = validation_document(plan, base, name)
    try:
        spec = spec_mod.validate(document)
    except SpecError as exc:
        raise ValueError(f"validate: {exc}") from None
    ref = SweepRef(spec.name, spec.run_dir, spec.database_url)
    if resume:
        from tuner.analysis import ExperimentAnalysis

        with ExperimentAnalysis(ref.run_dir, database_url=ref.database_url) as done:
            report = load_report(done)
        if report.complete:
            return report
    links = [SaveSpec(ref.spec_file, spec.document, ref.url), LinkValidation(plan, ref.url, analysis.store_url)]
    options = RunOptions(**spec.run_kwargs(), verbose=verbose, raise_on_failed_trial=False, resume=resume,
                         callbacks=[*links, *callbacks])
    result = run_sweep(spec.trainable, options)
    try:
        return make_report(name, plan, result.trials)
    finally:
        result.close()
