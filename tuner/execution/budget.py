"""A sweep cut by its time budget: what it left undone, stored so that every reader can say so.

As in Ray Tune the budget stops the running trials (they end TERMINATED) and no new trial starts.
What Ray Tune leaves unsaid is kept here: the trials the searcher made but never started, and
running ones cut before their first result, stay PENDING, and the sweep is stored as INCOMPLETE with a note of how many trials did not run (those
and the ones the searcher would still have proposed). A resume runs them, under a fresh budget:
``time_budget_s`` counts from the start of each run, as Ray Tune's does after a restore.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Any

from schedulers.trial_status import TrialStatus

from tuner.search.basic_variant import BasicVariantGenerator
from tuner.search.searcher import Searcher
from tuner.store import Store
from tuner.sweep_status import SweepStatus

__all__ = ["BudgetCut", "budget_cut", "load_budget_cut", "save_budget_cut", "unproposed", "warn_silent_trials"]

_STATE_KEY = "budget_cut"

logger = logging.getLogger("tuner.execution.controller")


@dataclasses.dataclass(frozen=True)
class BudgetCut:
    """How a time budget left a sweep: ``not_run`` of its ``total`` trials never ran (None: the
    searcher cannot say how many it would still have proposed)."""

    budget_s: float
    not_run: int | None
    total: int | None

    def line(self, resume_hint: str) -> str:
        """One line for the user; ``resume_hint`` is the call or command that runs the rest."""
        if self.not_run is None:
            what = "the searcher had not finished (how many trials it would still propose is unknown)"
        else:
            what = f"{self.not_run} of {self.total} trials did not run"
        return (f"time budget of {self.budget_s:g} s spent: {what}; the sweep is stored as {SweepStatus.INCOMPLETE}, "
                f"{resume_hint} runs the rest (with a fresh time budget)")


def unproposed(searcher: Searcher, max_trials: int | None, proposed: int) -> int | None:
    """How many trials ``searcher`` would still propose after ``proposed`` ones (None: unknown)."""
    if max_trials is not None:
        return max(0, max_trials - proposed)
    inner = searcher
    while not isinstance(inner, BasicVariantGenerator) and isinstance(getattr(inner, "searcher", None), Searcher):
        inner = inner.searcher  # type: ignore[attr-defined]
    if isinstance(inner, BasicVariantGenerator):
        return max(0, inner.total_trials - inner.num_suggested)
    return None


def budget_cut(budget_s: float, left: int | None, trials: Sequence[Any]) -> BudgetCut | None:
    """How the spent budget ``budget_s`` left the sweep, with ``left`` trials the searcher would
    still propose (None: unknown) and ``trials`` those it made; None when nothing was left undone."""
    pending = sum(t.status == TrialStatus.PENDING for t in trials)
    if left is not None and not left + pending:
        return None
    return BudgetCut(budget_s, None if left is None else left + pending, None if left is None else len(trials) + left)


def warn_silent_trials(sweep: str, trials: Sequence[Any]) -> None:
    """One warning naming the trials that ended without a single result (a function that
    returned before its first ``tune.report``): nothing else would tell them from good ones."""
    silent = [t.trial_name for t in trials if t.status == TrialStatus.TERMINATED and t.last_result is None]
    if silent:
        more = f" and {len(silent) - 5} more" if len(silent) > 5 else ""
        logger.warning("sweep %s: %d trial(s) reported no result (a function trainable must call tune.report): "
                       "%s%s", sweep, len(silent), ", ".join(silent[:5]), more)


def save_budget_cut(store: Store, experiment_id: int, cut: BudgetCut | None) -> None:
    """Record how the sweep's last run ended (None: not cut short by its budget)."""
    note: dict[str, Any] = {} if cut is None else dataclasses.asdict(cut)
    store.save_state(experiment_id, _STATE_KEY, json.dumps(note).encode())


def load_budget_cut(store: Store, experiment_id: int) -> BudgetCut | None:
    """The budget cut recorded at the end of the sweep's last run, None if it was not cut short."""
    blob = store.load_state(experiment_id, _STATE_KEY)
    note = json.loads(blob) if blob else {}
    return BudgetCut(**note) if note else None
