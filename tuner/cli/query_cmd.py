"""``tuner ls``, ``tuner show NAME``, ``tuner best NAME`` and ``tuner export NAME``: read a sweep's
store (during the run or after it; from any process) and print it."""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import io
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from schedulers.trial_status import ENDED, TrialStatus
from tuner.cli.errors import EXIT_FAILED, EXIT_OK, CLIError
from tuner.cli.live import fmt
from tuner.cli.paths import (
    DB_FILE,
    SPEC_FILE,
    SweepRef,
    check_url_flag,
    default_storage_path,
    first_line,
    locate,
    location_flags,
    not_found,
    open_store,
    stored_experiment,
)
from tuner.cli.table import format_table
from tuner.display import short_value
from tuner.execution.heartbeat import shown_status
from tuner.sweep_status import SweepStatus


def jsonable(value: Any) -> Any:
    """Plain JSON data: numpy scalars unwrapped, infinities as the strings "Infinity" and
    "-Infinity" (standard JSON has no token for them, and null is what was not reported), NaN as
    null (a table's missing value), objects as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        value = value.item()
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _analysis(ref: SweepRef) -> Any:
    from tuner.analysis import ExperimentAnalysis
    from tuner.errors import TuneError
    from tuner.store import StoreError

    try:
        return ExperimentAnalysis(ref.run_dir, database_url=ref.database_url)
    except StoreError as exc:  # a database that cannot be reached or read, a corrupt file
        raise CLIError(first_line(exc, ref.url), EXIT_FAILED) from None
    except TuneError as exc:  # no such sweep (and why, when its run directory tells)
        line = first_line(exc, ref.url)
        raise CLIError(not_found(ref) if line.startswith("no sweep named") else line) from None
    except ValueError as exc:  # a malformed URL
        raise CLIError(first_line(exc, ref.url)) from None


def _store_errors(verb: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A verb whose store fails while it reads (a corrupt page, a lost connection): one line, exit 1."""

    @functools.wraps(verb)
    def run(args: argparse.Namespace) -> int:
        from tuner.store import StoreError

        try:
            return verb(args)
        except StoreError as exc:
            raise CLIError(first_line(exc, getattr(args, "database_url", None)), EXIT_FAILED) from None

    return run


def _counts(statuses: list[str]) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _when(timestamp: Any) -> str:
    if not isinstance(timestamp, (int, float)):
        return ""
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


# -- tuner ls -------------------------------------------------------------------------------------
def _sweep_rows(store: Any, run_dir: Path | None = None, own_store: bool = False) -> Iterator[list[str]]:
    """One row per sweep of ``store``; with ``run_dir``, that run directory's sweep only, under its
    name (a run directory moved or copied with its store is listed under its new name)."""
    if run_dir is None:
        experiments = store.list_experiments()
    else:
        from tuner.relocation import find_sweep

        found, _ = find_sweep(store, run_dir, own_store=own_store)
        experiments = [] if found is None else [{**found, "name": run_dir.name}]
    for experiment in experiments:
        trials = store.trials(int(experiment["id"]))
        metric, mode = experiment.get("metric"), experiment.get("mode")
        best = ""
        if metric and mode:
            row = store.best_trial(int(experiment["id"]), metric, mode)
            if row is not None:
                best = f"{metric}={fmt(row.get('metric_value'))}"
        ended = sum(t["status"] in ENDED for t in trials)
        planned = (experiment.get("spec") or {}).get("planned_trials")
        total = max(planned, len(trials)) if isinstance(planned, int) else len(trials)
        counts = f"{ended}/{total}" + (f" ({_counts([t['status'] for t in trials])})" if trials else "")
        yield [experiment["name"], shown_status(experiment), experiment.get("owner") or "-",
               experiment.get("job_id") or "-", counts, best, _when(experiment.get("created_at"))]


@_store_errors
def cmd_ls(args: argparse.Namespace) -> int:
    """List the sweeps of a storage path (or of a database) with their trial counts."""
    rows: list[list[str]] = []
    if args.database_url:
        check_url_flag(args.database_url)
        where = SweepRef("", Path("."), args.database_url).url_for_display
        if _holds_no_tables(args.database_url):  # no sweep has started there yet
            print(f"no sweeps in {where}")
            return EXIT_OK
        store = open_store(SweepRef("", Path("."), args.database_url))
        try:
            rows = list(_sweep_rows(store))
        finally:
            store.close()
    else:
        root = Path(args.storage_path or default_storage_path()).expanduser().absolute()
        where = str(root)
        for run_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            if not (run_dir / DB_FILE).exists() and not (run_dir / SPEC_FILE).exists():
                continue
            try:  # a sweep in another database is found through the URL its spec saved (no password)
                ref = locate(str(run_dir))
                store = open_store(ref)
            except CLIError as exc:
                print(f"tuner: skipping {run_dir.name}: {exc}", file=sys.stderr)
                continue
            try:
                rows.extend(_sweep_rows(store, run_dir, own_store=ref.database_url is None))
            finally:
                store.close()
    if not rows:
        print(f"no sweeps in {where}")
        return EXIT_OK
    print(format_table(["NAME", "STATUS", "OWNER", "JOB", "TRIALS", "BEST", "CREATED"], rows))
    return EXIT_OK


def _holds_no_tables(url: str) -> bool:
    """Whether a database (not a SQLite file: that must exist) holds no tuner table at all."""
    from tuner.store import NoSchemaError, Store

    if url.startswith("sqlite"):
        return False
    try:
        Store(url, create=False).close()
    except NoSchemaError:
        return True
    except Exception:  # noqa: BLE001 - open_store says what is wrong, in one line
        return False
    return False


# -- tuner show -----------------------------------------------------------------------------------
def _varying_keys(configs: list[dict[str, Any]]) -> list[str]:
    """Flattened config keys whose values differ between trials (all of them for one trial)."""
    from tuner.flatten import flatten_dict

    flat = [flatten_dict(c) for c in configs]
    keys: list[str] = []
    for config in flat:
        keys += [k for k in config if k not in keys]
    if len(flat) <= 1:
        return keys
    return [k for k in keys if len({repr(c.get(k)) for c in flat}) > 1]


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


@_store_errors
def cmd_show(args: argparse.Namespace) -> int:
    """A sweep's status, every trial (status, iterations, metric, searched values, error) and its best."""
    ref = locate(args.name, args.storage_path, args.database_url)
    experiment = stored_experiment(ref)
    analysis = _analysis(ref)
    try:
        if getattr(args, "profile", False):
            return _show_profile(analysis)
        trials = analysis.trials
        metric, mode = experiment.get("metric"), experiment.get("mode")
        keys = _varying_keys([t.config for t in trials])
        _print_sweep_info(ref, experiment, trials)
        cut = analysis.budget_cut if experiment.get("status") == SweepStatus.INCOMPLETE else None
        if cut is not None:
            print(cut.line(f"`tuner resume {ref.name}{location_flags(ref)}`"))
        if trials:
            _print_trials(trials, metric, keys)
        if metric and mode:
            _print_best(analysis, metric, mode)
    finally:
        analysis.close()
    return EXIT_OK


def _status_text(experiment: dict[str, Any]) -> str:
    """The sweep's status as it is, and why when that is not what the store says."""
    status = shown_status(experiment)
    if status != experiment.get("status"):
        return (f"{status} (stored as {experiment.get('status')}, but its driver's last heartbeat was "
                f"{_when(experiment.get('heartbeat_at'))}: it stopped without a word; `tuner resume` continues it)")
    return status


def _print_sweep_info(ref: SweepRef, experiment: dict[str, Any], trials: list[Any]) -> None:
    metric, mode = experiment.get("metric"), experiment.get("mode")
    spec = experiment.get("spec") or {}
    info = [
        ("sweep", ref.name),
        ("status", _status_text(experiment)),
        ("trainable", spec.get("trainable", "")),
        ("metric", f"{metric} ({mode})" if metric else "none"),
        ("trials", f"{len(trials)}" + (f": {_counts([t.status for t in trials])}" if trials else "")),
        ("created", _when(experiment.get("created_at"))),
        ("store", ref.url_for_display),
        ("run dir", str(ref.run_dir)),
    ]
    if experiment.get("owner"):
        info.insert(2, ("owner", str(experiment["owner"])))
    if experiment.get("job_id"):
        info.insert(3, ("job", f"{experiment['job_id']} at {experiment.get('job_address') or '?'}"))
    if spec.get("tensorboard_dir"):
        info.append(("tensorboard", str(spec["tensorboard_dir"])))
    width = max(len(k) for k, _ in info)
    print("\n".join(f"{k.ljust(width)}  {v}" for k, v in info))


def _print_trials(trials: list[Any], metric: str | None, keys: list[str]) -> None:
    """One row per trial: status, iteration, metric, the searched values, sampling layout, error."""
    from tuner.flatten import flatten_dict

    # Distributed trainers say where they sampled (and, for num_workers="auto", why).
    layouts = [(t.last_result or {}).get("sampling_layout") for t in trials]
    with_layout = any(layouts)
    headers = ["TRIAL", "STATUS", "ITER", *([metric] if metric else []), *keys,
               *(["SAMPLING"] if with_layout else []), "ERROR"]
    rows = []
    for trial, layout in zip(trials, layouts):
        flat = flatten_dict(trial.config)
        result = flatten_dict(trial.last_result or {})
        rows.append([trial.trial_id, trial.status, result.get("training_iteration", 0),
                     *([fmt(result.get(metric))] if metric else []), *[fmt(flat.get(k)) for k in keys],
                     *([layout or ""] if with_layout else []),
                     _last_line(trial.error) if trial.status == TrialStatus.ERROR else ""])
    print()
    print(format_table(headers, rows))
    reasons = sorted({r for t in trials if (r := (t.last_result or {}).get("sampling_layout_reason"))})
    for reason in reasons:
        print(f"sampling (num_workers='auto'): {reason}")


def _print_best(analysis: Any, metric: str, mode: str) -> None:
    from tuner.flatten import flatten_dict

    answer = analysis.explain_best_trial(metric, mode)
    best, note = answer.trial, answer.note()
    print()
    if best is None:
        print(f"best: {note or f'no trial has reported {metric!r} yet'}")
    else:
        print(f"best: {best.trial_id} {metric}={fmt(flatten_dict(best.last_result).get(metric))}  "
              f"config: {json.dumps(short_value(jsonable(best.config)))}")
        if note:
            print(f"note: {note}")


_PROFILE_COLUMNS = ("cpus", "hold_s", "start_s", "rollout_start_s", "sampling_s", "learning_s", "other_training_s",
                    "stop_s", "waiting_s")


def _show_profile(analysis: Any) -> int:
    """``tuner show NAME --profile``: the profile table, then every trial's split (seconds)."""
    from tuner.profile import format_profile

    profile = analysis.profile()
    if profile is None:
        print("no time profile is stored for this sweep (it ran before profiles existed)")
        return EXIT_OK
    print(format_profile(profile))
    rows = [[trial_id, *(fmt(round(row[c], 2)) for c in _PROFILE_COLUMNS)]
            for trial_id, row in sorted(analysis.trial_profiles().items())]
    if rows:
        print()
        print(format_table(["TRIAL", "CPUS", "HELD S", "START", "ROLLOUT START", "SAMPLING", "LEARNING", "OTHER",
                            "STOP", "WAITING"], rows))
    return EXIT_OK


# -- tuner best -----------------------------------------------------------------------------------
@_store_errors
def cmd_best(args: argparse.Namespace) -> int:
    """The best trial's config and result (``--json`` for scripts)."""
    from tuner.flatten import flatten_dict

    ref = locate(args.name, args.storage_path, args.database_url)
    analysis = _analysis(ref)
    if getattr(args, "validated", False):
        try:
            return _print_validated_best(analysis, ref, args.json)
        finally:
            analysis.close()
    try:
        metric = args.metric or analysis.default_metric
        mode = args.mode or analysis.default_mode
        if not metric or not mode:
            raise CLIError(f"sweep {ref.name!r} has no metric and mode: pass --metric and --mode")
        answer = analysis.explain_best_trial(metric, mode, scope=args.scope)
        best, note = answer.trial, answer.note()
        if best is None:
            print(f"tuner: sweep {ref.name!r}: {note or f'no trial has reported {metric!r} yet'}", file=sys.stderr)
            return EXIT_FAILED
        if note:
            print(f"tuner: note: {note}", file=sys.stderr)
        value = flatten_dict(best.last_result).get(metric)
        if args.json:
            print(json.dumps(jsonable({
                "name": ref.name, "trial_id": best.trial_id, "status": best.status, "metric": metric,
                "mode": mode, "scope": args.scope, "value": value, "config": best.config,
                "result": best.last_result, "checkpoint_path": best.checkpoint_path,
                "skipped": {tid: str(v) for tid, v in answer.skipped.items()},  # NaN / inf scores
            }), indent=2))
        else:
            from tuner.cli.yaml_io import dump

            print(f"best trial: {best.trial_id} ({best.status}), {metric}={fmt(value)} "
                  f"at iteration {best.last_result.get('training_iteration', '?')}")
            from tuner.held_out.link import linked_validation

            validated = "" if linked_validation(analysis) is None else "; --validated: the best on held-out seeds"
            print(f"(the best of the sweep's own trials, scope {args.scope}{validated})")
            print("config:")
            print("  " + dump(short_value(jsonable(best.config)), block=True).rstrip().replace("\n", "\n  "))
    finally:
        analysis.close()
    return EXIT_OK


def _print_validated_best(analysis: Any, ref: SweepRef, as_json: bool) -> int:
    """``tuner best NAME --validated``: the config ranked first on the validation's held-out seeds."""
    report = analysis.validation()
    if report is None:
        raise CLIError(f"sweep {ref.name!r} has no validation: `tuner validate {ref.name}` makes one")
    best = report.best
    if best is None:
        print(f"tuner: validation {report.name!r} of sweep {ref.name!r} has no finished trial yet", file=sys.stderr)
        return EXIT_FAILED
    if as_json:
        print(json.dumps(jsonable({"name": ref.name, "validation": report.name, "metric": report.plan.metric,
                                   "mode": report.plan.mode, "sweep_rank": best.sweep_rank, "iqm": best.iqm,
                                   "mean": best.mean, "ci95": [best.ci_low, best.ci_high],
                                   "seeds": best.seeds_done, "complete": report.complete,
                                   "config": best.candidate.config}), indent=2))
        return EXIT_OK
    from tuner.cli.yaml_io import dump

    print(f"validated best: #{best.sweep_rank} of the sweep, first on {best.seeds_done} held-out seed(s) of "
          f"validation {report.name}: {report.plan.metric} IQM {fmt(best.iqm)} (95% CI {fmt(best.ci_low)} .. "
          f"{fmt(best.ci_high)}), mean {fmt(best.mean)}" + ("" if report.complete else " (not finished)"))
    print("config (train it with any seed):")
    print("  " + dump(short_value(jsonable(best.candidate.config)), block=True).rstrip().replace("\n", "\n  "))
    return EXIT_OK


# -- tuner export ---------------------------------------------------------------------------------
def _export_frame(analysis: Any, what: str) -> Any:
    import pandas as pd

    from tuner.flatten import flatten_dict

    if what == "trials":
        return analysis.dataframe()
    trials = {t.trial_id: t for t in analysis.trials}
    frame = analysis.results_df
    if frame.empty:
        return frame
    configs = pd.DataFrame([
        {"trial_id": tid, **{f"config/{k}": v for k, v in flatten_dict(t.config).items()}} for tid, t in trials.items()
    ])
    return frame.merge(configs, on="trial_id", how="left")


@_store_errors
def cmd_export(args: argparse.Namespace) -> int:
    """Every result (or every trial) of a sweep as CSV or JSON, to stdout or ``--output``
    (written whole or not at all)."""
    if args.output:
        _check_output(Path(args.output))
    ref = locate(args.name, args.storage_path, args.database_url)
    analysis = _analysis(ref)
    try:
        frame = _export_frame(analysis, args.what)
    finally:
        analysis.close()
    if args.format == "csv":
        buffer = io.StringIO()
        if not frame.empty:
            frame.to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
        text = buffer.getvalue()
    else:
        records = [jsonable(r) for r in frame.to_dict(orient="records")]
        text = json.dumps(records, indent=1) + "\n"
    if args.output:
        _write_whole(Path(args.output), text)
        print(f"wrote {len(frame)} {args.what} of sweep {ref.name!r} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _check_output(path: Path) -> None:
    """``--output`` must name a file in a folder that exists."""
    if path.is_dir():
        raise CLIError(f"--output: {str(path)!r} is a folder; give a file path")
    if not path.absolute().parent.is_dir():
        raise CLIError(f"--output: the folder {str(path.absolute().parent)!r} does not exist; create it first")


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it: never half a file."""
    tmp = path.absolute().with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise CLIError(f"--output: cannot write into {str(tmp.parent)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CLIError(f"--output: cannot write {str(path)!r}: {exc.strerror}", EXIT_FAILED) from None
