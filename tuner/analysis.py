"""Answers about a sweep, read from its SQL store: during the run, after it, in another process."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from schedulers.trial_scheduler import validate_mode
from schedulers.trial_status import TrialStatus
from schedulers.validation import is_number
from tuner.best_rule import number_at, pick_best
from tuner.errors import TuneError
from tuner.execution.budget import BudgetCut, load_budget_cut
from tuner.relocation import find_sweep
from tuner.flatten import flatten_dict
from tuner.store import NoSchemaError, Store, default_database_url

if TYPE_CHECKING:  # pandas is slow to import, and only the dataframe accessors need it
    import pandas as pd

    from tuner.held_out.report import ValidationReport

SCOPES = ("all", "last", "avg", "last-5-avg", "last-10-avg")
#: Which answer ``get_best_config`` gives: the sweep's own, or its validation's.
BY = ("sweep", "validated")

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class TrialRecord:
    """A trial as the store holds it."""

    trial_id: str
    index: int
    config: dict[str, Any]
    status: str
    last_result: dict[str, Any]
    error: str | None
    num_failures: int
    checkpoint_path: str | None
    #: The trial's directory (its checkpoints, files it wrote).
    trial_dir: str | None = None

    @property
    def checkpoint(self) -> Any:
        from tuner.trainable.checkpoint import Checkpoint

        return Checkpoint(self.checkpoint_path) if self.checkpoint_path else None


def _starting(url: str, name: str, run_dir: Path) -> bool:
    """Whether a driver holds sweep ``name`` now (so that its store without tables is one being made)."""
    from tuner.execution.sweep_lock import running_driver
    from tuner.store import StoreError

    try:
        return running_driver(url, name, run_dir) is not None
    except (StoreError, ValueError):
        return False


def _finite(value: Any) -> bool:
    return is_number(value, finite=True, numpy=False)


@dataclasses.dataclass(frozen=True)
class BestTrial:
    """Which trial is best, and why: the trial (None when none ranks), its score, and the trials
    left out of the ranking because their score is NaN or infinite (trial_id -> score)."""

    metric: str
    mode: str
    scope: str
    trial: TrialRecord | None
    value: float | None
    skipped: dict[str, float]

    def note(self) -> str | None:
        """One line on the trials that were skipped (None when none was)."""
        if not self.skipped:
            return None
        shown = ", ".join(f"{tid} ({_spell(v)})" for tid, v in list(self.skipped.items())[:5])
        more = f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else ""
        if self.trial is None:
            return (f"no trial has a finite {self.metric!r} to rank: {shown}{more} reported NaN or infinity, "
                    f"which never ranks (as in Ray Tune)")
        return (f"{len(self.skipped)} trial(s) left out of the best {self.metric!r}: {shown}{more} reported "
                f"NaN or infinity, which never ranks (as in Ray Tune)")


def _spell(value: float) -> str:
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")


class ExperimentAnalysis:
    """Best trial, best config and dataframes of one sweep, read from its store.

    Example:
        >>> analysis = tune.load("./results/demo")          # doctest: +SKIP
        >>> analysis.get_best_config("score", "max")        # doctest: +SKIP
    """

    def __init__(
        self,
        experiment_path: str | os.PathLike[str],
        *,
        database_url: str | None = None,
        default_metric: str | None = None,
        default_mode: str | None = None,
    ) -> None:
        path = Path(experiment_path).expanduser().absolute()
        self.experiment_path = str(path)
        self.name = path.name
        url = database_url or default_database_url(path)
        #: The database the sweep is in (None: the SQLite file of its run directory).
        self.database_url = database_url
        self.store_url = url
        if database_url is None and not (path / "tuner.db").exists():
            raise TuneError(f"no sweep found at {self.experiment_path!r} (no tuner.db there)")
        try:
            self._store = Store(url, create=False)
        except NoSchemaError:
            # A sweep's first moments (its driver holds the sweep, its tables are being created),
            # else an empty or foreign file: the store's own line says which.
            if not _starting(url, self.name, path):
                raise
            raise TuneError(f"no sweep yet at {self.experiment_path!r} (its store holds no tuner table yet: "
                            f"its driver is creating it)") from None
        # A run directory moved or copied with its store is found under its new name (relocation.py).
        record, self._relocation = find_sweep(self._store, path, own_store=database_url is None)
        if record is None:
            raise TuneError(f"no sweep named {self.name!r} in the store {self._store.url_for_display}")
        self._experiment_id = int(record["id"])
        self.spec: dict[str, Any] = dict(record.get("spec") or {})
        self.default_metric = default_metric or record.get("metric")
        self.default_mode = validate_mode(default_mode or record.get("mode"), "default_mode")
        self._warned: set[tuple[str, str]] = set()  # notes on skipped trials logged so far

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> "ExperimentAnalysis":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- trials and results ------------------------------------------------------------------
    @property
    def trials(self) -> list[TrialRecord]:
        """Every trial, in the order they were created (read fresh from the store)."""
        out = []
        for row in self._store.trials(self._experiment_id):
            config = row["config"]
            if row.get("config_blob"):
                try:
                    config = pickle.loads(row["config_blob"])
                except Exception:  # noqa: BLE001 - the JSON copy will do
                    pass
            out.append(
                TrialRecord(
                    trial_id=row["trial_id"],
                    index=row["trial_index"],
                    config=config,
                    status=row["status"],
                    last_result=row.get("last_result") or {},
                    error=row.get("error"),
                    num_failures=row.get("num_failures") or 0,
                    checkpoint_path=self._moved(row.get("checkpoint_path")),
                    trial_dir=self._moved(row.get("trial_dir"))
                    or os.path.join(self.experiment_path, f"{self.spec.get('trainable', 'trial')}_{row['trial_id']}"),
                )
            )
        return out

    @property
    def budget_cut(self) -> BudgetCut | None:
        """How the time budget left the sweep's last run (how many trials did not run), or None
        when it was not cut short; a resume runs the rest."""
        return load_budget_cut(self._store, self._experiment_id)

    def _histories(self) -> dict[str, list[dict[str, Any]]]:
        histories: dict[str, list[dict[str, Any]]] = {}
        for result in self._store.results(self._experiment_id):
            histories.setdefault(result["trial_id"], []).append(result)
        return histories

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """trial_id -> its last result."""
        return {t.trial_id: t.last_result for t in self.trials}

    @property
    def results_df(self) -> pd.DataFrame:
        """Every stored result of every trial, one row each, nested keys flattened with '/'."""
        rows = [flatten_dict(r) for r in self._store.results(self._experiment_id)]
        import pandas as pd

        return pd.DataFrame(rows)

    @property
    def trial_dataframes(self) -> dict[str, pd.DataFrame]:
        """trial_id -> DataFrame of its results in iteration order."""
        import pandas as pd

        return {tid: pd.DataFrame([flatten_dict(r) for r in rs]) for tid, rs in self._histories().items()}

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> pd.DataFrame:
        """One row per trial: its last result (or, with metric and mode, its best one) and its config."""
        validate_mode(mode)
        histories = self._histories() if metric and mode else {}
        rows = []
        for trial in self.trials:
            result = trial.last_result
            if metric and mode:
                scored = [r for r in histories.get(trial.trial_id, []) if _finite(r.get(metric))]
                if scored:
                    pick = max if mode == "max" else min
                    result = pick(scored, key=lambda r: r[metric])
            row = flatten_dict(dict(result))
            row.update({f"config/{k}": v for k, v in flatten_dict(trial.config).items()})
            row["trial_id"] = trial.trial_id
            row["status"] = trial.status
            rows.append(row)
        import pandas as pd

        return pd.DataFrame(rows)

    # -- best ----------------------------------------------------------------------------------
    def _metric_mode(self, metric: str | None, mode: str | None) -> tuple[str, str]:
        metric = metric or self.default_metric
        mode = validate_mode(mode or self.default_mode)
        if not metric or not mode:
            raise ValueError(
                "metric and mode are needed to pick a best trial: pass them here or to tune.run "
                f"(got metric={metric!r}, mode={mode!r})"
            )
        return metric, mode

    def get_best_trial(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> TrialRecord | None:
        """The trial with the best ``metric``; ``scope`` says which of its results count
        ('last', 'avg', 'last-5-avg', 'last-10-avg', or 'all' for its best ever).

        As in Ray Tune, a NaN or infinite score never ranks (unless ``filter_nan_and_inf`` is
        False): such trials are named in a logged warning, and when no trial is left the answer
        is None with a warning that says why. :meth:`explain_best_trial` returns both."""
        answer = self.explain_best_trial(metric, mode, scope, filter_nan_and_inf)
        note = answer.note()
        if note is not None and (note, scope) not in self._warned:
            self._warned.add((note, scope))
            logger.warning("sweep %r: %s", self.name, note)
        return answer.trial

    def explain_best_trial(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> BestTrial:
        """:meth:`get_best_trial`'s answer with its score and the trials whose NaN or infinite
        score was left out of the ranking (nothing is logged)."""
        metric, mode = self._metric_mode(metric, mode)
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {list(SCOPES)}, got {scope!r}")
        trials = self.trials
        histories = self._histories() if scope != "last" else {}
        scored = [(t.trial_id, self._score(t, histories.get(t.trial_id, []), metric, mode, scope)) for t in trials]
        best_id, best_value, skipped = pick_best(scored, mode, filter_nan_and_inf)
        best = next((t for t in trials if t.trial_id == best_id), None) if best_id is not None else None
        return BestTrial(metric=metric, mode=mode, scope=scope, trial=best, value=best_value, skipped=skipped)

    @staticmethod
    def _score(trial: TrialRecord, history: Sequence[dict[str, Any]], metric: str, mode: str,
               scope: str) -> float | None:
        if scope == "last":
            return number_at(trial.last_result, metric)
        values = [v for r in history if (v := number_at(r, metric)) is not None]
        if not values:
            return None
        if scope == "all":
            return max(values) if mode == "max" else min(values)
        if scope == "avg":
            return sum(values) / len(values)
        window = 5 if scope == "last-5-avg" else 10
        tail = values[-window:]
        return sum(tail) / len(tail)

    def get_best_config(self, metric: str | None = None, mode: str | None = None, scope: str = "last",
                        by: str = "sweep") -> dict[str, Any] | None:
        """The best config: ``by="sweep"``, its best trial's (by ``metric`` over ``scope``, on the
        sweep's own seeds); ``by="validated"``, the config that ranked first on held-out seeds in
        the sweep's validation (:meth:`validate`; without a seed: train it on any)."""
        if by not in BY:
            raise ValueError(f"by must be one of {list(BY)}, got {by!r}")
        if by == "validated":
            report = self.validation()
            if report is None:
                raise ValueError(f"by='validated': sweep {self.name!r} has no validation; run "
                                 f"tune.load(...).validate(top_k=..., seeds=...) or `tuner validate {self.name}`")
            return report.best_config
        trial = self.get_best_trial(metric, mode, scope)
        return trial.config if trial else None

    @property
    def best_trial(self) -> TrialRecord | None:
        return self.get_best_trial()

    @property
    def best_config(self) -> dict[str, Any] | None:
        """The best trial's config on the sweep's own seeds (``get_best_config(by="validated")``:
        the validated answer)."""
        return self.get_best_config()

    # -- held-out seeds ------------------------------------------------------------------------
    def validate(self, top_k: int = 3, seeds: int = 10, *, name: str | None = None, metric: str | None = None,
                 stop: Any = None, resources_per_trial: Any = None, callbacks: Sequence[Any] = (),
                 verbose: int = 0) -> ValidationReport:
        """Retrain the sweep's ``top_k`` best configs on ``seeds`` seeds none of its trials used, as
        a follow-on sweep ``name`` (default ``<sweep>-validation``) beside it in the same store,
        and report per config the mean, IQM and bootstrap 95% interval of the final ``metric``
        (default the sweep's) and its rank there against its rank in the sweep
        (:mod:`tuner.held_out`). Asked again, a finished validation is read, an unfinished one
        resumed. The trainable is the sweep's by name (a function of a script: register it with
        ``tune.register_trainable`` first); ``stop`` and ``resources_per_trial`` default to the sweep's."""
        from tuner.held_out.runner import validation_runner

        overrides = {k: v for k, v in (("stop", stop), ("resources", resources_per_trial)) if v is not None}
        return validation_runner()(self, top_k, seeds, name=name, metric=metric, overrides=overrides,
                                   callbacks=callbacks, verbose=verbose)

    def validation(self) -> ValidationReport | None:
        """The report of this sweep's validation as it stands (None: it has none); for a
        validation sweep itself, its own report."""
        from tuner.held_out.link import linked_validation, load_plan, load_report, validation_path

        if load_plan(self._store, self._experiment_id) is not None:
            return load_report(self)
        name = linked_validation(self)
        if name is None:
            return None
        with ExperimentAnalysis(validation_path(self, name), database_url=self.database_url) as validation:
            return load_report(validation)

    @property
    def best_result(self) -> dict[str, Any] | None:
        trial = self.best_trial
        return trial.last_result if trial else None

    @property
    def best_checkpoint(self) -> Any:
        trial = self.best_trial
        return trial.checkpoint if trial else None

    @property
    def best_dataframe(self) -> pd.DataFrame:
        trial = self.best_trial
        import pandas as pd

        return self.trial_dataframes.get(trial.trial_id, pd.DataFrame()) if trial else pd.DataFrame()

    def trial_results(self, trial_id: str) -> list[dict[str, Any]]:
        """Every stored result of trial ``trial_id``, oldest first, nested as it was reported."""
        return self._store.results(self._experiment_id, trial_id)

    @property
    def exploits(self) -> list[dict[str, Any]]:
        """PBT lineage, oldest first: trial_id took donor_trial_id's checkpoint at iteration,
        going from old_config to new_config."""
        return [{**r, "checkpoint_path": self._moved(r.get("checkpoint_path"))}
                for r in self._store.exploits(self._experiment_id)]

    def checkpoints(self, trial_id: str | None = None, *, include_deleted: bool = False) -> list[dict[str, Any]]:
        """Recorded checkpoints (of one trial, or all), oldest first: trial_id, path, iteration,
        metrics (the result it was taken with), deleted, deleted_at. Checkpoints deleted by
        retention (``num_to_keep``) are left out unless ``include_deleted``."""
        rows = self._store.checkpoints(self._experiment_id, trial_id)
        return [{**r, "path": self._moved(r["path"])} for r in rows if include_deleted or not r["deleted"]]

    def get_best_checkpoint(self, trial: Any = None, metric: str | None = None, mode: str | None = None) -> Any:
        """The best kept checkpoint of ``trial`` (a TrialRecord or id; default the best trial) by
        ``metric`` and ``mode`` (default the sweep's) as it was when the checkpoint was taken, as
        Ray Tune's; its newest when none holds the metric; None when it kept none."""
        from tuner.trainable.checkpoint import Checkpoint

        trial = self.best_trial if trial is None else trial
        if trial is None:
            return None
        trial_id = trial if isinstance(trial, str) else trial.trial_id
        metric, mode = metric or self.default_metric, mode or self.default_mode
        kept = self.checkpoints(trial_id)
        scored = [r for r in kept if metric and isinstance((r.get("metrics") or {}).get(metric), (int, float))
                  and math.isfinite(r["metrics"][metric])]
        if scored and mode in ("min", "max"):
            sign = 1.0 if mode == "max" else -1.0
            best = max(scored, key=lambda r: (sign * float(r["metrics"][metric]), r["iteration"]))
        elif kept:
            best = kept[-1]
        else:
            return None
        return Checkpoint(best["path"])

    def _moved(self, path: str | None) -> str | None:
        """A stored path, read under the sweep's run directory when it was moved or copied since."""
        return path if self._relocation is None else self._relocation.path(path)

    def profile(self) -> dict[str, Any] | None:
        """Where the sweep's wall time went (see :mod:`tuner.execution.profiler`): CPU-seconds per
        part summed over trials (``rows``), the capacity they add up to, the driver's own work; None
        for a sweep stored before profiles existed. ``tuner.profile.format_profile`` prints it;
        ``trial_profiles()`` has the per-trial split."""
        from tuner.execution.profiler import load_profile

        return load_profile(self._store, self._experiment_id)

    def trial_profiles(self) -> dict[str, dict[str, float]]:
        """trial_id -> where that trial's time went: cpus, hold_s, start_s, sampling_s, learning_s,
        other_training_s, stop_s, waiting_s (seconds)."""
        return self._store.trial_profiles(self._experiment_id)

    @property
    def errors(self) -> dict[str, str]:
        """trial_id -> stored traceback of trials that ended in ERROR."""
        return {t.trial_id: t.error or "" for t in self.trials if t.status == TrialStatus.ERROR}

    def __repr__(self) -> str:
        return f"ExperimentAnalysis({self.experiment_path!r})"


def load(path: str | os.PathLike[str], *, database_url: str | None = None) -> ExperimentAnalysis:
    """The analysis of the sweep stored at ``path`` (its run directory), from any process."""
    return ExperimentAnalysis(path, database_url=database_url)
