"""A wrapper that caps how many of a searcher's trials run at once (Ray Tune's name).

    >>> from tuner.search.basic_variant import BasicVariantGenerator
    >>> from tuner.search.space import uniform
    >>> limiter = ConcurrencyLimiter(BasicVariantGenerator(random_state=0), max_concurrent=1)
    >>> limiter.set_search_properties("loss", "min", {"x": uniform(0, 1)}, num_samples=3)
    True
    >>> limiter.suggest("a") is not None, limiter.suggest("b")
    (True, None)
    >>> limiter.on_trial_complete("a", {"loss": 1.0})
    >>> limiter.suggest("b") is not None
    True
"""

from __future__ import annotations

import copy
import inspect
import logging
from typing import Any

from schedulers.validation import is_int

from .searcher import Searcher

__all__ = ["ConcurrencyLimiter"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1


def _accepted_kwargs(method: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The part of ``kwargs`` that ``method`` accepts (all if it takes ``**kwargs``)."""
    if not kwargs:
        return kwargs
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


class ConcurrencyLimiter(Searcher):
    """Let at most ``max_concurrent`` trials of ``searcher`` be live at a time.

    ``suggest`` returns None while ``max_concurrent`` suggested trials have not completed;
    everything else is passed through to the wrapped searcher. With ``batch=True`` the wrapped
    searcher sees no completion until the whole batch of ``max_concurrent`` trials has
    completed (then all of them, in completion order), and no new trial starts before that:
    useful for searchers that propose a batch at a time.

    If the wrapped searcher has ``set_max_concurrency(n)`` and it returns True, the searcher
    enforces the limit itself and the limiter only passes calls through (Ray Tune's contract).
    """

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        if not isinstance(searcher, Searcher):
            raise ValueError(
                f"searcher must be a Searcher, got {type(searcher).__name__}"
            )
        if not is_int(max_concurrent, numpy=False) or max_concurrent < 1:
            raise ValueError(f"max_concurrent must be an integer >= 1, got {max_concurrent!r}")
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self.batch = bool(batch)
        self._live: list[str] = []  # in suggestion order
        self._cached: dict[str, tuple[dict | None, bool, dict[str, Any]]] = {}
        self._limit_concurrency = True

    # metric and mode are the wrapped searcher's (it may learn them in set_search_properties).
    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    @property
    def live_trials(self) -> set[str]:
        """The trials counted against the limit."""
        return set(self._live)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        set_max = getattr(self.searcher, "set_max_concurrency", None)
        if callable(set_max):
            self._limit_concurrency = not set_max(self.max_concurrent)
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict | str | None:
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if trial_id in self._live:
            raise ValueError(f"ConcurrencyLimiter.suggest: trial {trial_id!r} is already live")
        if len(self._live) >= self.max_concurrent:
            logger.debug("ConcurrencyLimiter: %d trials live (max_concurrent=%d); no suggestion",
                         len(self._live), self.max_concurrent)
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion is not None and suggestion != Searcher.FINISHED:
            self._live.append(trial_id)
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False, **kwargs: Any
    ) -> None:
        if not self._limit_concurrency:
            self._complete(trial_id, result, error, kwargs)
            return
        if trial_id not in self._live or trial_id in self._cached:
            return  # not one of ours (or already told): Ray Tune ignores it too
        if not self.batch:
            self._complete(trial_id, result, error, kwargs)
            self._live.remove(trial_id)
            return
        self._cached[trial_id] = (result, error, dict(kwargs))
        if len(self._cached) < len(self._live):
            return
        # The whole batch has completed: tell the wrapped searcher, then free the slots.
        cached, self._cached = self._cached, {}
        for tid, (res, err, kw) in cached.items():
            self._complete(tid, res, err, kw)
        self._live = []

    def add_evaluated_point(self, *args: Any, **kwargs: Any) -> Any:
        """Passed through to the wrapped searcher (e.g. :class:`OptunaSearch`)."""
        method = getattr(self.searcher, "add_evaluated_point", None)
        if method is None:
            raise AttributeError(
                f"{type(self.searcher).__name__} has no add_evaluated_point"
            )
        return method(*args, **kwargs)

    def state_dict(self) -> dict:
        state: dict[str, Any] = {"metric": self.metric, "mode": self.mode}
        state.update(
            version=_STATE_VERSION,
            max_concurrent=self.max_concurrent,
            batch=self.batch,
            live=list(self._live),
            cached=copy.deepcopy(
                {tid: [res, err, kw] for tid, (res, err, kw) in self._cached.items()}
            ),
            searcher=self.searcher.state_dict(),  # the wrapped searcher's own snapshot
        )
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore the live trials and the wrapped searcher's state. The ``max_concurrent``
        and ``batch`` given to this limiter's constructor are kept."""
        if not isinstance(state, dict) or "searcher" not in state or "live" not in state:
            raise ValueError(
                "state must be a dict from ConcurrencyLimiter.state_dict(), got "
                f"{type(state).__name__}"
            )
        self._live = list(state["live"])
        self._cached = {
            tid: (res, bool(err), dict(kw))
            for tid, (res, err, kw) in state.get("cached", {}).items()
        }
        self.searcher.load_state_dict(state["searcher"])

    # ----------------------------------------------------------------- internals

    def _complete(self, trial_id: str, result: dict | None, error: bool,
                  kwargs: dict[str, Any]) -> None:
        method = self.searcher.on_trial_complete
        method(trial_id, result, error, **_accepted_kwargs(method, kwargs))
