"""A result the sweep cannot rank or stop on fails the sweep before it is recorded.

The sweep's metric and every ``stop`` key must be in a trial's first result, and the metric must
be a number in every one: otherwise no scheduler, searcher or ``best_config`` could use them.
Missing keys are checked once (a resumed sweep's trials reported them already).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from tuner.stopper import DictStopper, Stopper
from tuner.trainable.trainable import AUTO_RESULT_KEYS


class ResultCheck:
    """Checks each result of a sweep with ``metric`` (None: none) and ``stopper``."""

    def __init__(self, metric: str | None, stopper: Stopper) -> None:
        self._metric = metric
        self._stop_keys = list(stopper.thresholds) if isinstance(stopper, DictStopper) else []
        #: Whether the keys were found once (or there are none to look for).
        self.keys_found = metric is None and not self._stop_keys

    def __call__(self, trial_name: str, flat: Mapping[str, Any]) -> None:
        """Raise ValueError naming the trial and what it reported when ``flat`` cannot be used."""
        metric = self._metric
        value = flat.get(metric) if metric is not None else None
        if value is not None and type(value) not in (float, int) and not isinstance(value, numbers.Real):
            raise ValueError(
                f"metric {metric!r} must be a number: trial {trial_name} reported "
                f"{value!r} ({type(value).__name__}) at iteration {flat.get('training_iteration')}"
            )
        if self.keys_found:
            return
        reported = sorted(k for k in flat if not k.startswith("_") and k not in AUTO_RESULT_KEYS)
        if metric is not None and metric not in flat:
            raise ValueError(
                f"metric {metric!r} was never reported: the first result (trial {trial_name}) "
                f"holds only {reported}; name one of them as tune.run's metric"
            )
        missing = [key for key in self._stop_keys if key not in flat]
        if missing:
            raise ValueError(
                f"stop: key {missing[0]!r} was never reported: the first result (trial {trial_name}) "
                f"holds only {reported} and the engine's own keys {list(AUTO_RESULT_KEYS)}"
            )
        self.keys_found = True
