"""The Searcher API: proposes the configs of new trials (Ray Tune's names)."""

from __future__ import annotations

from typing import Any

from schedulers.validation import check_mode as validate_mode  # the one mode check, public here too

__all__ = ["Searcher", "validate_mode", "validate_metric"]


def validate_metric(metric: Any, field: str = "metric") -> str | None:
    """Return ``metric`` if it is None or a non-empty str; raise a ValueError naming ``field``."""
    if metric is not None and (not isinstance(metric, str) or not metric):
        raise ValueError(f"{field} must be a non-empty string or None, got {metric!r}")
    return metric


class Searcher:
    """Base class of every searcher.

    The controller drives a searcher like this:

    1. ``set_search_properties(metric, mode, config, **spec)`` once, before any suggestion, with
       the experiment's metric, mode and search space (``spec`` carries extras such as
       ``num_samples`` and ``seed``). It returns True when the searcher accepted them, False when
       it keeps a space of its own (Ray Tune's contract).
    2. ``suggest(trial_id)`` whenever a trial could start. It returns

       - a config (a new plain ``dict``) for trial ``trial_id``;
       - ``None``: no suggestion right now (e.g. a concurrency limit, or waiting for results).
         The controller asks again later; if it gets None while no trial is live, it treats
         the search as finished (nothing could ever unblock it);
       - :attr:`Searcher.FINISHED`: the search is over, never ask again.

    3. ``on_trial_result(trial_id, result)`` for every intermediate result, and
       ``on_trial_complete(trial_id, result, error)`` once when a trial ends (``result`` is its
       last result, or None; ``error`` is True when it failed).
    4. ``state_dict()`` is saved with the sweep; a resumed sweep builds the searcher the same
       way, calls ``set_search_properties`` with the same arguments, then ``load_state_dict``,
       and the searcher continues as if never interrupted.

    ``metric`` and ``mode`` given to the constructor win; ``set_search_properties`` fills in
    those left None and returns False on a conflicting value.
    """

    FINISHED = "FINISHED"

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        self._metric = validate_metric(metric)
        self._mode = validate_mode(mode)

    @property
    def metric(self) -> str | None:
        """The result key being optimized, or None if not known yet."""
        return self._metric

    @property
    def mode(self) -> str | None:
        """``"min"`` or ``"max"``, or None if not known yet."""
        return self._mode

    def own_space(self) -> dict[str, Any] | None:
        """The dict search space this searcher holds as its own (e.g. ``OptunaSearch(space={...})``),
        as nested dicts; None when it has none (the base class never has one)."""
        return None

    def defines_space_by_run(self) -> bool:
        """Whether its space is a function that suggests values trial by trial (Optuna's
        define-by-run): which keys it varies is not known before the trials come."""
        return False

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        """Take the experiment's metric and mode where the searcher was given none.

        Returns False (and changes nothing) when the searcher already has a different metric or
        mode, so the caller can report the conflict; subclasses also return False when they
        keep a search space of their own. Invalid values raise a ValueError naming them.
        """
        metric = validate_metric(metric)
        mode = validate_mode(mode)
        if self._metric is not None and metric is not None and metric != self._metric:
            return False
        if self._mode is not None and mode is not None and mode != self._mode:
            return False
        if self._metric is None:
            self._metric = metric
        if self._mode is None:
            self._mode = mode
        return True

    def suggest(self, trial_id: str) -> dict | str | None:
        """A config for trial ``trial_id``, None (nothing now) or :attr:`FINISHED`."""
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """An intermediate result of a live trial. Default: ignored."""

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False, **kwargs: Any
    ) -> None:
        """Trial ``trial_id`` ended (``error`` True when it failed). Default: ignored."""

    def state_dict(self) -> dict:
        """Everything needed to continue after a restart; plain data (picklable)."""
        return {"metric": self._metric, "mode": self._mode}

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict, got {type(state).__name__}")
        if state.get("metric") is not None:
            self._metric = validate_metric(state["metric"])
        if state.get("mode") is not None:
            self._mode = validate_mode(state["mode"])
