"""``tuner validate NAME --top-k K --seeds N``: retrain a sweep's K best configs on N held-out seeds
as a follow-on sweep (``NAME-validation``), then print per config its held-out mean, IQM and 95%
interval and its rank there against its rank in the sweep (see :mod:`tuner.held_out`). Run again,
it reads a finished validation and resumes an unfinished one; ``--submit`` runs it as a Ray Job."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from tuner.cli.errors import EXIT_OK, CLIError
from tuner.cli.live import fmt
from tuner.cli.paths import SweepRef, locate, location_flags, remember_location
from tuner.cli.table import format_table
from tuner.display import short_repr

__all__ = ["cmd_validate", "format_report"]


def format_report(report: Any) -> str:
    """The report as a table and a line on what it says about the sweep's answer."""
    from tuner.flatten import flatten_dict

    plan = report.plan
    from tuner.cli.query_cmd import _varying_keys

    keys = _varying_keys([c.candidate.config for c in report.configs])  # distinct configs: some key differs
    rows = []
    for c in report.configs:
        flat = flatten_dict(c.candidate.config)
        ci = "-" if math.isnan(c.ci_low) else f"[{fmt(c.ci_low)}, {fmt(c.ci_high)}]"
        rows.append([str(c.sweep_rank), "-" if c.held_out_rank is None else str(c.held_out_rank),
                     fmt(c.candidate.score), fmt(c.mean), fmt(c.iqm), ci, f"{c.seeds_done}/{len(plan.seeds)}",
                     short_repr({k: flat.get(k) for k in keys})])
    lines = [f"validation {report.name} of sweep {plan.sweep}: {plan.metric} ({plan.mode}) on held-out seeds "
             f"{plan.seeds[0]}..{plan.seeds[-1]}" + ("" if report.complete else " (not finished)"),
             format_table(["SWEEP RANK", "HELD-OUT RANK", "SWEEP", "MEAN", "IQM", "95% CI (IQM)", "SEEDS", "CONFIG"],
                          rows)]
    best = report.best
    if best is not None:
        if best.sweep_rank == 1:
            lines.append("the sweep's best config is also the best on held-out seeds")
        else:
            first = next(c for c in report.configs if c.sweep_rank == 1)
            where = "not finished" if first.held_out_rank is None else f"ranks {first.held_out_rank}"
            lines.append(f"the sweep's best config {where} on held-out seeds; the validated best is its "
                         f"#{best.sweep_rank}: {short_repr(best.candidate.config)}")
    return "\n".join(lines)


def cmd_validate(args: argparse.Namespace) -> int:
    """``tuner validate NAME``: run (or read) the validation and print its report."""
    from tuner.held_out.run import validation_name

    ref = locate(args.name, args.storage_path, args.database_url)
    name = args.as_name or validation_name(ref.name)
    vref = SweepRef(name, ref.run_dir.parent / name, ref.database_url)
    if args.submit:
        return _submit(args, ref, vref)
    report = _run(args, ref, vref)
    if isinstance(report, int):
        return report
    if args.json:
        print(json.dumps(_jsonable_report(report), indent=2))
    else:
        print(format_report(report))
    return EXIT_OK


def _jsonable_report(report: Any) -> dict[str, Any]:
    from tuner.cli.query_cmd import jsonable

    plan = report.plan
    return jsonable({"name": report.name, "sweep": plan.sweep, "metric": plan.metric, "mode": plan.mode,
                     "seeds": list(plan.seeds), "complete": report.complete, "configs": report.rows()})


def _run(args: argparse.Namespace, ref: SweepRef, vref: SweepRef) -> Any:
    """The report, or an exit code when the validation failed or was interrupted."""
    import os

    from tuner.cli.interrupt import discard_unstarted
    from tuner.cli.live import make_progress
    from tuner.cli.query_cmd import _analysis
    from tuner.cli.sweep_cmd import _failed
    from tuner.execution.signals import graceful_sigint, graceful_sigterm
    from tuner.held_out.run import run_validation, stored_spec_of

    if args.address:
        os.environ["RAY_ADDRESS"] = args.address
    analysis = _analysis(ref)
    created = vref.database_url is None and not vref.run_dir.exists()
    progress = make_progress(args.progress, vref.name, args.metric or analysis.default_metric, analysis.default_mode)
    with graceful_sigterm(), graceful_sigint(ignore_after=True):
        try:
            report = run_validation(analysis, args.top_k, args.seeds, name=vref.name, metric=args.metric,
                                    stored_document=stored_spec_of(analysis),
                                    callbacks=[progress] if progress is not None else [])
        except BaseException:  # noqa: BLE001 - interrupts included: said as `tuner sweep` says them
            if progress is not None:
                progress.close()
            if created:
                discard_unstarted(vref.run_dir, vref.url, vref.name)
            return _failed(vref, args)
        finally:
            if progress is not None:
                progress.close()
            analysis.close()
    remember_location(vref)
    return report


def _submit(args: argparse.Namespace, ref: SweepRef, vref: SweepRef) -> int:
    """Plan the validation here and submit it as a Ray Job (``tuner sweep`` of its spec); its plan
    and link are stored once the job is recorded."""
    from tuner.cli import spec as spec_mod
    from tuner.cli import submit_cmd
    from tuner.cli.query_cmd import _analysis
    from tuner.held_out.plan import validation_document
    from tuner.held_out.link import LinkValidation
    from tuner.held_out.run import base_document, plan_validation, stored_spec_of

    analysis = _analysis(ref)
    try:
        plan = plan_validation(analysis, args.top_k, args.seeds, args.metric)
        base = base_document(analysis, stored_spec_of(analysis))
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    finally:
        analysis.close()
    base.update(storage_path=str(ref.run_dir.parent), database_url=ref.database_url)
    spec = spec_mod.validate(validation_document(plan, base, vref.name))
    vref = SweepRef(spec.name, spec.run_dir, spec.database_url)
    submit_cmd._check_store(vref, submit_cmd._jobs_url(args.address), resuming=False)  # noqa: SLF001
    jobs = submit_cmd._jobs(args.address)  # noqa: SLF001
    job_id = submit_cmd._submit(jobs, vref, spec, ["sweep", "sweep.yaml"])  # noqa: SLF001
    from tuner.store import Store

    with Store(vref.url, create=False) as store:
        experiment = store.get_experiment(vref.name)
    if experiment is not None:
        LinkValidation(plan, vref.url, ref.url).setup(experiment_id=experiment["id"], experiment_name=vref.name)
    remember_location(vref)
    submit_cmd._submitted(vref, job_id, jobs.address)  # noqa: SLF001
    print(f"  its report: tuner validate {ref.name}{location_flags(ref)} --top-k {args.top_k} --seeds {args.seeds}"
          + (f" --name {vref.name}" if args.as_name else ""), file=sys.stdout)
    return EXIT_OK
