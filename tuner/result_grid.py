"""``ResultGrid`` and ``Result``: what ``Tuner.fit()`` returns (Ray Tune's names), read from the store.

A thin view over :class:`~tuner.analysis.ExperimentAnalysis`: best result, dataframes and errors
are the analysis's answers on the same stored sweep, so the two never disagree.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, TypeGuard

from schedulers.trial_scheduler import validate_mode
from schedulers.trial_status import TrialStatus
from schedulers.validation import is_number
from tuner.analysis import SCOPES, ExperimentAnalysis, TrialRecord
from tuner.display import short_value
from tuner.errors import TuneError
from tuner.execution.checkpoint_manager import CheckpointRecord, rank_checkpoints
from tuner.flatten import flatten_dict
from tuner.trainable.checkpoint import Checkpoint

if TYPE_CHECKING:
    import pandas as pd


class Result:
    """One trial's outcome: ``metrics`` (its last result, with ``config``), ``config``, ``checkpoint`` (its latest
    checkpoint on disk), ``error`` (None unless it failed), ``path`` (its directory),
    ``metrics_dataframe`` (every result it reported) and ``best_checkpoints`` (the checkpoints
    kept on disk with the results they were taken with, worst to best)."""

    def __init__(self, analysis: ExperimentAnalysis, trial: TrialRecord,
                 checkpoints: list[tuple[Checkpoint, dict[str, Any]]]) -> None:
        self._analysis = analysis
        self._trial = trial
        self.config: dict[str, Any] = trial.config
        # As in Ray Tune, the metrics hold the trial's config too (the store's results do not).
        self.metrics: dict[str, Any] = {**trial.last_result, "config": trial.config} if trial.last_result else {}
        self.checkpoint: Checkpoint | None = trial.checkpoint
        self.error: Exception | None = TuneError(trial.error or "the trial failed") if trial.status == TrialStatus.ERROR else None
        self.path: str = trial.trial_dir or ""
        self.best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = checkpoints
        self._dataframe: pd.DataFrame | None = None

    @property
    def trial_id(self) -> str:
        return self._trial.trial_id

    @property
    def metrics_dataframe(self) -> "pd.DataFrame":
        """Every result the trial reported, in order (nested keys flattened with '/')."""
        if self._dataframe is None:
            import pandas as pd

            rows = self._analysis.trial_results(self._trial.trial_id)
            self._dataframe = pd.DataFrame([flatten_dict(r) for r in rows])
        return self._dataframe

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose result has the best ``metric`` (``mode`` "min" or "max")."""
        if not self.best_checkpoints:
            raise RuntimeError(f"trial {self.trial_id} has no checkpoint on disk")
        validate_mode(mode)
        if mode is None:
            raise ValueError("mode must be one of ['min', 'max'], got None")
        scored = [(c, v) for c, m in self.best_checkpoints if _number(v := flatten_dict(m).get(metric))]
        if not scored:
            raise RuntimeError(f"no checkpoint of trial {self.trial_id} has a number for {metric!r}")
        pick = max if mode == "max" else min
        return pick(scored, key=lambda cv: cv[1])[0]

    def __repr__(self) -> str:
        error = f", error={type(self.error).__name__}" if self.error else ""
        return f"Result(trial_id={self.trial_id!r}, metrics={_short(self.metrics)}, path={self.path!r}{error})"


class ResultGrid:
    """The results of a sweep, one :class:`Result` per trial in trial order (Ray Tune's ``ResultGrid``).

    Example:
        >>> grid = tune.Tuner(train, param_space={"x": tune.uniform(0, 1)},     # doctest: +SKIP
        ...                   tune_config=tune.TuneConfig(metric="score", mode="max")).fit()
        >>> grid.get_best_result().config, grid.get_dataframe(), grid.errors      # doctest: +SKIP
    """

    def __init__(self, analysis: ExperimentAnalysis) -> None:
        self._analysis = analysis
        self._trials = analysis.trials
        kept = _kept_checkpoints(analysis)
        self._results = [Result(analysis, t, kept.get(t.trial_id, [])) for t in self._trials]

    @property
    def experiment_path(self) -> str:
        """The sweep's run directory (``<storage_path>/<name>``)."""
        return self._analysis.experiment_path

    @property
    def analysis(self) -> ExperimentAnalysis:
        """The :class:`ExperimentAnalysis` of the same sweep."""
        return self._analysis

    def get_best_result(self, metric: str | None = None, mode: str | None = None, scope: str = "last",
                        filter_nan_and_inf: bool = True) -> Result:
        """The result of the best trial by ``metric`` (TuneConfig's by default); ``scope``
        ("last", "avg", "last-5-avg", "last-10-avg", or "all" for each trial's best ever) says
        which of a trial's results count."""
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {list(SCOPES)}, got {scope!r}")
        if len(self._results) == 1:  # as Ray Tune: the only trial, whatever the metric
            return self._results[0]
        if not (metric or self._analysis.default_metric):
            raise ValueError("metric: none given; pass metric= here or set TuneConfig(metric=...)")
        if not (mode or self._analysis.default_mode):
            raise ValueError("mode: none given; pass mode= here or set TuneConfig(mode=...)")
        best = self._analysis.get_best_trial(metric, mode, scope, filter_nan_and_inf=filter_nan_and_inf)
        if best is None:
            raise RuntimeError(
                f"no best trial for metric {metric or self._analysis.default_metric!r}: no trial reported a "
                f"{'finite ' if filter_nan_and_inf else ''}number for it"
            )
        return self._results[[t.trial_id for t in self._trials].index(best.trial_id)]

    def get_dataframe(self, filter_metric: str | None = None, filter_mode: str | None = None) -> "pd.DataFrame":
        """One row per trial: its last result (or, with ``filter_metric`` and ``filter_mode``, its
        best one) and its config (``config/...`` columns)."""
        if (filter_metric is None) != (filter_mode is None):
            raise ValueError("filter_metric and filter_mode go together: pass both or neither")
        return self._analysis.dataframe(filter_metric, filter_mode)

    @property
    def errors(self) -> list[Exception]:
        """The errors of the trials that failed."""
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        return sum(t.status == TrialStatus.ERROR for t in self._trials)

    @property
    def num_terminated(self) -> int:
        return sum(t.status == TrialStatus.TERMINATED for t in self._trials)

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> Result:
        return self._results[i]

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    def __repr__(self) -> str:
        return f"ResultGrid({self.experiment_path!r}, {len(self)} results, {self.num_errors} errors)"


def _kept_checkpoints(analysis: ExperimentAnalysis) -> dict[str, list[tuple[Checkpoint, dict[str, Any]]]]:
    """trial_id -> its checkpoints on disk with their metrics, ranked as retention ranks them."""
    spec = analysis.spec
    by_trial: dict[str, list[CheckpointRecord]] = {}
    for row in analysis.checkpoints():
        by_trial.setdefault(row["trial_id"], []).append(CheckpointRecord(
            trial_id=row["trial_id"], path=row["path"], iteration=int(row["iteration"]),
            metrics=row["metrics"] or {}, timestamp=float(row["timestamp"]),
        ))
    attribute, order = spec.get("checkpoint_score_attribute"), spec.get("checkpoint_score_order") or "max"
    return {
        trial_id: [(Checkpoint(r.path), r.metrics) for r in rank_checkpoints(records, attribute, order)]
        for trial_id, records in by_trial.items()
    }


def _number(value: Any) -> TypeGuard[float]:
    return is_number(value, numpy=False) and not math.isnan(value)


def _short(metrics: dict[str, Any]) -> dict[str, Any]:
    skip = ("timestamp", "time_this_iter_s", "trial_id", "done", "config")
    keep = {k: v for k, v in metrics.items() if k not in skip}
    return short_value(dict(list(keep.items())[:6]))


__all__ = ["Result", "ResultGrid"]
