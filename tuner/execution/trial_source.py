"""Where a sweep's trials come from: the searcher's configs, and what the searcher is told back.

The controller asks for a new config only when a slot is free and the scheduler chose no
waiting trial, so a model-based searcher (Optuna's TPE) sees as many results as possible before
each suggestion. The searcher is told every result and, once, the end of every trial.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Collection
from typing import Any

from tuner.execution.budget import unproposed
from tuner.search.searcher import Searcher


class TrialSource:
    """``searcher``'s configs for new trials, at most ``max_trials`` (None: until it finishes)."""

    def __init__(self, searcher: Searcher, max_trials: int | None, timed: Callable[[str], Any]) -> None:
        self.searcher = searcher
        self._max_trials = max_trials
        self._timed = timed
        self._prefix = uuid.uuid4().hex[:5]
        #: No new trial will come (the searcher finished, or max_trials were made).
        self.finished = False
        #: Trials whose end the searcher has been told.
        self.told_ended: set[str] = set()
        self._takes_pruned = _accepts_keyword(searcher.on_trial_complete, "pruned")

    def propose(self, proposed: int, live: Callable[[], bool]) -> tuple[str, dict[str, Any]] | None:
        """The id and config of trial number ``proposed`` (0-based), or None: none now (the
        searcher waits for results; when no trial is ``live()`` any more, none will ever come)."""
        if self.finished:
            return None
        if self._max_trials is not None and proposed >= self._max_trials:
            self.finished = True
            return None
        trial_id = f"{self._prefix}_{proposed:05d}"
        with self._timed("searcher"):
            config = self.searcher.suggest(trial_id)
        if config is None or config == Searcher.FINISHED:
            if config == Searcher.FINISHED or not live():
                self.finished = True
            return None
        if isinstance(config, str):
            raise TypeError(f"searcher.suggest returned {config!r}: expected a config dict, None or Searcher.FINISHED")
        return trial_id, config

    def left(self, proposed: int) -> int | None:
        """How many trials the searcher would still propose after ``proposed`` (None: unknown)."""
        return 0 if self.finished else unproposed(self.searcher, self._max_trials, proposed)

    def result(self, trial_id: str, flat: dict[str, Any]) -> None:
        with self._timed("searcher"):
            self.searcher.on_trial_result(trial_id, flat)

    def ended(self, trial_id: str, last: dict[str, Any] | None, *, pruned: bool = False,
              error: bool = False) -> None:
        """Tell the searcher a trial ended; ``pruned`` (a scheduler stopped it) if it can take that."""
        self.told_ended.add(trial_id)
        if pruned and self._takes_pruned:
            self.searcher.on_trial_complete(trial_id, last, error=error, pruned=True)
        else:
            self.searcher.on_trial_complete(trial_id, last, error=error)

    def resume(self, state: Any | None, told_ended: Collection[str]) -> None:
        """A resumed sweep: the searcher's stored state, and the trials it was told ended."""
        self.told_ended = set(told_ended)
        if state is not None:
            self.searcher.load_state_dict(state)


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
