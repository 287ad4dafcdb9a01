"""A validation sweep's answer: per config, its final scores on the held-out seeds, their mean, IQM
and a bootstrap 95% confidence interval, and its rank there against its rank in the sweep.

The IQM (the mean of the middle half, ``scipy.stats.trim_mean(x, 0.25)``) and its percentile
bootstrap interval (``scipy.stats.bootstrap``) are rliable's robust statistics for RL results
(Agarwal et al., NeurIPS 2021): an outlying seed moves them less than it moves the mean. Configs
are ranked on held-out seeds by their IQM.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from tuner.held_out.plan import Candidate, ValidationPlan

__all__ = ["ConfigReport", "ValidationReport", "bootstrap_ci", "iqm", "make_report"]

#: Bootstrap resamples of the confidence interval (seeded: a report reads the same every time).
RESAMPLES = 2000


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean of ``values`` (NaN for none)."""
    if not len(values):
        return math.nan
    from scipy.stats import trim_mean

    return float(trim_mean(np.asarray(values, dtype=float), 0.25))


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval of the IQM of ``values``; (NaN, NaN) for fewer than two,
    (v, v) when they are all equal."""
    data = np.asarray(values, dtype=float)
    if len(data) < 2:
        return math.nan, math.nan
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    from scipy.stats import bootstrap, trim_mean

    result = bootstrap((data,), lambda x, axis: trim_mean(x, 0.25, axis=axis), n_resamples=RESAMPLES,
                       confidence_level=confidence, method="percentile", random_state=0)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@dataclasses.dataclass(frozen=True)
class ConfigReport:
    """One candidate on the held-out seeds: ``scores`` (one per finished seed, in seed order)."""

    candidate: Candidate
    scores: tuple[float, ...]
    seeds_done: int
    mean: float
    iqm: float
    ci_low: float
    ci_high: float
    held_out_rank: int | None

    @property
    def sweep_rank(self) -> int:
        return self.candidate.rank


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """The validation of sweep ``plan.sweep`` by sweep ``name``; ``complete``: every trial ended."""

    name: str
    plan: ValidationPlan
    configs: tuple[ConfigReport, ...]
    complete: bool

    @property
    def best(self) -> ConfigReport | None:
        """The config ranked first on the held-out seeds (None before any trial finished)."""
        ranked = [c for c in self.configs if c.held_out_rank is not None]
        return min(ranked, key=lambda c: c.held_out_rank or 0) if ranked else None

    @property
    def best_config(self) -> dict[str, Any] | None:
        """The validated answer: the best config on held-out seeds (without a seed)."""
        best = self.best
        return dict(best.candidate.config) if best is not None else None

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per config (JSON-ready)."""
        return [{"sweep_rank": c.sweep_rank, "held_out_rank": c.held_out_rank, "sweep_score": c.candidate.score,
                 "mean": c.mean, "iqm": c.iqm, "ci95": [c.ci_low, c.ci_high], "seeds": c.seeds_done,
                 "scores": list(c.scores), "trial_ids": list(c.candidate.trial_ids), "config": c.candidate.config}
                for c in self.configs]


def make_report(name: str, plan: ValidationPlan, trials: Sequence[Any]) -> ValidationReport:
    """The report of validation sweep ``name`` from its trials (``TrialRecord`` s, trial ``k * N + j``
    being candidate ``k`` on seed ``j``): only trials that finished count."""
    from schedulers.trial_status import ENDED, TrialStatus
    from tuner.best_rule import number_at

    per_seed = len(plan.seeds)
    scores: list[list[float]] = [[] for _ in plan.candidates]
    for trial in trials:
        k = trial.index // per_seed
        value = number_at(trial.last_result, plan.metric)
        if k < len(scores) and trial.status == TrialStatus.TERMINATED and value is not None and math.isfinite(value):
            scores[k].append(float(value))
    summaries = [(iqm(s), s) for s in scores]
    sign = -1.0 if plan.mode == "max" else 1.0
    order = sorted((i for i, (m, _) in enumerate(summaries) if not math.isnan(m)), key=lambda i: sign * summaries[i][0])
    rank = {i: r + 1 for r, i in enumerate(order)}
    configs = []
    for k, (candidate, (middle, values)) in enumerate(zip(plan.candidates, summaries)):
        low, high = bootstrap_ci(values)
        configs.append(ConfigReport(candidate=candidate, scores=tuple(values), seeds_done=len(values),
                                    mean=float(np.mean(values)) if values else math.nan, iqm=middle, ci_low=low,
                                    ci_high=high, held_out_rank=rank.get(k)))
    complete = len(trials) == len(plan.candidates) * per_seed and all(t.status in ENDED for t in trials)
    return ValidationReport(name=name, plan=plan, configs=tuple(configs), complete=complete)
