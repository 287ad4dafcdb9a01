"""Plain-text progress of a sweep on the console (the CLI's live table builds on the same hooks)."""

from __future__ import annotations

import collections
import sys
import time
from typing import Any, Sequence, TextIO

from tuner.callback import Callback
from tuner.display import short_text
from tuner.execution.trial import Trial
from tuner.flatten import flat_result


def _value(result: dict[str, Any] | None, metric: str | None) -> Any:
    """The metric in a result, a nested one by its flat key (``"evaluation/episode_return_mean"``)."""
    return flat_result(result).get(metric) if result and metric else None


def _shown(value: Any) -> str:
    """A reported value as printed: a long one (a string metric, an array) shortened."""
    return short_text(str(value))


class ProgressReporter(Callback):
    """Prints a status line every ``interval_s`` seconds and a summary at the end.

    verbose: 0 silent, 1 periodic status and summary, 2 also each trial's end, 3 also every result.
    A ``tune.Callback`` like any logger: the controller feeds it through the callback hooks.
    """

    def __init__(self, verbose: int = 1, metric: str | None = None, mode: str | None = None,
                 interval_s: float = 10.0, out: TextIO | None = None) -> None:
        if verbose not in (0, 1, 2, 3):
            raise ValueError(f"verbose must be one of [0, 1, 2, 3], got {verbose!r}")
        self.verbose = verbose
        self.metric = metric
        self.mode = mode
        self.interval_s = interval_s
        self._out = out or sys.stdout
        self._start = time.monotonic()
        self._last = self._start
        self._results = 0

    def _print(self, text: str) -> None:
        print(text, file=self._out, flush=True)

    def on_note(self, text: str, **info: Any) -> None:
        """A line the sweep says once (how it packed its trials, say); shown unless ``verbose`` is 0."""
        if self.verbose >= 1:
            self._print(text)

    def on_result(self, trial: Trial, result: dict[str, Any]) -> None:
        self._results += 1
        if self.verbose >= 3:
            value = _value(result, self.metric)
            self._print(f"{trial.trial_name} iter {result.get('training_iteration')}: {self.metric}={_shown(value)}")

    def on_trial_end(self, trial: Trial) -> None:
        if self.verbose >= 2:
            value = _value(trial.last_result, self.metric)
            self._print(f"{trial.trial_name} {trial.status} after {trial.iteration} iterations"
                        + (f", {self.metric}={_shown(value)}" if self.metric else ""))

    def status_line(self, trials: Sequence[Trial]) -> str:
        counts = collections.Counter(t.status for t in trials)
        elapsed = time.monotonic() - self._start
        parts = [f"{n} {s}" for s, n in sorted(counts.items())]
        line = f"[{elapsed:7.1f}s] {len(trials)} trials ({', '.join(parts) or 'none'}), {self._results} results"
        best = self.best(trials)
        if best is not None:
            line += f", best {self.metric}={_value(best.last_result, self.metric):.6g} ({best.trial_name})"
        return line

    def best(self, trials: Sequence[Trial]) -> Trial | None:
        if not self.metric or self.mode not in ("min", "max"):
            return None
        scored = [t for t in trials if isinstance(_value(t.last_result, self.metric), (int, float))]
        if not scored:
            return None
        pick = max if self.mode == "max" else min
        return pick(scored, key=lambda t: _value(t.last_result, self.metric))

    def maybe_report(self, trials: Sequence[Trial]) -> None:
        if self.verbose < 1:
            return
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self._last = now
            self._print(self.status_line(trials))

    def final_report(self, trials: Sequence[Trial]) -> None:
        if self.verbose >= 1:
            self._print(self.status_line(trials))

    # -- the callback hooks ----------------------------------------------------------------------
    def on_trial_result(self, iteration: int, trials: Sequence[Trial], trial: Trial, result: dict[str, Any],
                        **info: Any) -> None:
        self.on_result(trial, result)

    def on_trial_complete(self, iteration: int, trials: Sequence[Trial], trial: Trial, **info: Any) -> None:
        self.on_trial_end(trial)

    def on_trial_error(self, iteration: int, trials: Sequence[Trial], trial: Trial, **info: Any) -> None:
        self.on_trial_end(trial)

    def on_step_end(self, iteration: int, trials: Sequence[Trial], **info: Any) -> None:
        self.maybe_report(trials)

    def on_experiment_end(self, trials: Sequence[Trial], **info: Any) -> None:
        self.final_report(trials)
