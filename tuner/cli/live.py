"""Progress of a running sweep: a live rich table on a terminal, plain lines otherwise.

Both are ``tune.Callback``s fed by the controller's hooks in the driver's loop; they keep their
own small view of the sweep (trial statuses, latest results, the best so far, the result rate),
so rendering never touches the controller's objects.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
import time
from typing import Any, Mapping, Sequence, TextIO

from schedulers.trial_status import TrialStatus
from tuner.callback import Callback
from tuner.display import short_text
from tuner.flatten import flatten_dict

RATE_WINDOW_S = 10.0
#: The widest value :func:`fmt` prints (a table cell, a config value in a progress line).
FMT_WIDTH = 40
_STATUS_ORDER = (TrialStatus.RUNNING, TrialStatus.PENDING, TrialStatus.PAUSED, TrialStatus.TERMINATED,
                 TrialStatus.ERROR)
_STATUS_STYLE: dict[str, str] = {TrialStatus.RUNNING: "green", TrialStatus.PENDING: "yellow", TrialStatus.PAUSED: "cyan",
                 TrialStatus.TERMINATED: "blue", TrialStatus.ERROR: "red"}


def fmt(value: Any, width: int = FMT_WIDTH) -> str:
    """A metric or config value in a few characters (a long one shortened, saying how long it was)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    return short_text(str(value), width)


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}"


class _TrialView:
    __slots__ = ("name", "status", "iteration", "value", "config")

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        self.name = name
        self.status: str = TrialStatus.PENDING
        self.iteration = 0
        self.value: Any = None
        self.config = flatten_dict(dict(config)) if isinstance(config, Mapping) else {}


class SweepProgress(Callback):
    """What the progress displays know about a sweep; updated by the callback hooks.

    Args:
        name: The sweep's name (shown in the header).
        metric, mode: The spec's metric and mode (the best so far needs both).
        searched: Flattened config keys shown as columns (the searched hyperparameters).
    """

    def __init__(self, name: str, metric: str | None, mode: str | None, searched: Sequence[str] = ()) -> None:
        self.name = name
        self.metric = metric
        self.mode = mode
        self.searched = list(searched)
        self._lock = threading.Lock()
        self._trials: dict[str, _TrialView] = {}
        self._start = time.monotonic()
        self._results = 0
        self._recent: collections.deque[float] = collections.deque()
        self._synced_at = 0.0

    # -- state -------------------------------------------------------------------------------
    def _view(self, trial: Any) -> _TrialView:
        view = self._trials.get(trial.trial_id)
        if view is None:
            view = self._trials[trial.trial_id] = _TrialView(trial.trial_name, trial.config)
            last = getattr(trial, "last_result", None) or {}  # a resumed sweep's earlier trials
            view.iteration = int(last.get("training_iteration", 0))
            view.value = self._metric_of(last)
        return view

    def _metric_of(self, result: dict[str, Any]) -> Any:
        if not self.metric:
            return None
        value = result.get(self.metric)
        if value is None and "/" in self.metric:
            value = flatten_dict(result).get(self.metric)
        return value

    def _sync(self, trials: Sequence[Any], force: bool = False) -> None:
        """Statuses the hooks do not announce (PENDING, PAUSED) from the controller's list."""
        now = time.monotonic()
        if not force and now - self._synced_at < 0.25:
            return
        self._synced_at = now
        for trial in list(trials):
            self._view(trial).status = trial.status

    def counts(self) -> dict[str, int]:
        counts = collections.Counter(v.status for v in self._trials.values())
        return {s: counts[s] for s in (*_STATUS_ORDER, *sorted(set(counts) - set(_STATUS_ORDER))) if counts[s]}

    def rate(self) -> float:
        """Results per second over the last few seconds (the whole run when shorter)."""
        now = time.monotonic()
        window = min(RATE_WINDOW_S, max(now - self._start, 1e-9))
        while self._recent and self._recent[0] < now - window:
            self._recent.popleft()
        return len(self._recent) / window

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def _scored(self) -> list[_TrialView]:
        """Trials whose latest result has a finite metric, best first."""
        if not self.metric or self.mode not in ("min", "max"):
            return []
        scored = [v for v in self._trials.values() if isinstance(v.value, (int, float))
                  and not isinstance(v.value, bool) and math.isfinite(v.value)]
        scored.sort(key=lambda v: v.value, reverse=self.mode == "max")
        return scored

    @property
    def best(self) -> tuple[float, str, int] | None:
        """(value, trial name, iteration) of the best trial by its latest result, as the
        analysis ranks trials at the end."""
        scored = self._scored()
        return (float(scored[0].value), scored[0].name, scored[0].iteration) if scored else None

    # -- hooks ---------------------------------------------------------------------------------
    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        with self._lock:
            self._start = time.monotonic()

    def on_trial_start(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        with self._lock:
            self._view(trial).status = TrialStatus.RUNNING
            self._sync(trials)

    def on_trial_result(self, iteration: int, trials: Sequence[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        with self._lock:
            view = self._view(trial)
            view.status = TrialStatus.RUNNING
            view.iteration = int(result.get("training_iteration", view.iteration + 1))
            self._results += 1
            self._recent.append(time.monotonic())
            view.value = self._metric_of(result)
            self._sync(trials)

    def on_trial_complete(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        with self._lock:
            self._view(trial).status = trial.status
            self._sync(trials, force=True)

    def on_trial_error(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        with self._lock:
            self._view(trial).status = TrialStatus.ERROR
            self._sync(trials, force=True)

    def on_experiment_end(self, trials: Sequence[Any], **info: Any) -> None:
        with self._lock:
            self._sync(trials, force=True)

    # -- text ------------------------------------------------------------------------------------
    def status_line(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items()) or "none yet"
        line = (f"[{_elapsed(self.elapsed())}] {len(self._trials)} trials ({counts}), "
                f"{self._results} results, {self.rate():.1f} results/s")
        return line + (f", {self.best_text()}" if self.best is not None else "")

    def best_text(self) -> str:
        best = self.best
        if best is None:
            return f"best {self.metric}: none yet" if self.metric else ""
        value, name, iteration = best
        return f"best {self.metric}={fmt(value)} ({name}, iter {iteration})"

    def close(self) -> None:
        """Stop displaying (idempotent); the sweep may have ended by an exception."""


class PlainProgress(SweepProgress):
    """One line per trial start and end, and a status line every ``interval_s`` (not a terminal)."""

    def __init__(self, *args: Any, out: TextIO | None = None, interval_s: float = 5.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._out = out or sys.stdout
        self.interval_s = interval_s
        self._printed_at = time.monotonic()

    def _print(self, text: str) -> None:
        print(text, file=self._out, flush=True)

    def _config_text(self, view: _TrialView) -> str:
        return " ".join(f"{k}={fmt(view.config.get(k))}" for k in self.searched if k in view.config)

    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        super().setup(stop, num_samples, total_num_samples, **info)
        what = f" ({self.metric}, {self.mode})" if self.metric else ""
        self._print(f"sweep {self.name}{what}: {'resumed' if info.get('resumed') else 'started'}")

    def on_trial_start(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        super().on_trial_start(iteration, trials, trial, **info)
        view = self._view(trial)
        self._print(f"[{_elapsed(self.elapsed())}] {view.name} RUNNING {self._config_text(view)}".rstrip())

    def _maybe_status(self) -> None:
        if time.monotonic() - self._printed_at >= self.interval_s:
            self._printed_at = time.monotonic()
            self._print(self.status_line())

    def on_trial_result(self, iteration: int, trials: Sequence[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        super().on_trial_result(iteration, trials, trial, result, **info)
        self._maybe_status()

    def on_step_end(self, iteration: int, trials: Sequence[Any], **info: Any) -> None:
        """Each pass of the controller's loop: a status line when one is due, results or not."""
        with self._lock:
            self._sync(trials)
        self._maybe_status()

    def _ended(self, trial: Any) -> None:
        view = self._view(trial)
        value = f", {self.metric}={fmt(view.value)}" if self.metric else ""
        self._print(f"[{_elapsed(self.elapsed())}] {view.name} {view.status} after {view.iteration} "
                    f"iterations{value}")

    def on_trial_complete(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        super().on_trial_complete(iteration, trials, trial, **info)
        self._ended(trial)

    def on_trial_error(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        super().on_trial_error(iteration, trials, trial, **info)
        self._ended(trial)

    def on_experiment_end(self, trials: Sequence[Any], **info: Any) -> None:
        super().on_experiment_end(trials, **info)
        self._print(self.status_line())

    def on_note(self, text: str, **info: Any) -> None:
        self._print(text)


class LiveTable(SweepProgress):
    """A rich live table: trials by status, running trials' latest metric and iteration, the best
    so far and the result rate, redrawn a few times a second."""

    MAX_ROWS = 15

    def __init__(self, *args: Any, console: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from rich.console import Console

        self._console = console or Console()
        self._live: Any = None

    def render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            header = Text.assemble(
                ("sweep ", "bold"), (self.name, "bold magenta"), f"  {_elapsed(self.elapsed())}  ",
                f"{len(self._trials)} trials: ",
                *[item for s, n in self.counts().items() for item in ((f"{n} {s}", _STATUS_STYLE.get(s, "")), "  ")],
                f"{self.rate():.1f} results/s",
            )
            best = Text(self.best_text(), style="bold green") if self.metric else Text("")
            table = Table(expand=False, box=None, header_style="bold", pad_edge=False)
            for column in ("trial", "status", "iter", *( [self.metric] if self.metric else []), *self.searched):
                table.add_column(column, justify="right" if column not in ("trial", "status") else "left")
            shown = self._rows()
            for view in shown[: self.MAX_ROWS]:
                cells: list[str | Text] = [view.name, Text(view.status, style=_STATUS_STYLE.get(view.status, "")), str(view.iteration)]
                if self.metric:
                    cells.append(fmt(view.value))
                cells += [fmt(view.config.get(k)) for k in self.searched]
                table.add_row(*cells)
            more = Text(f"... and {len(shown) - self.MAX_ROWS} more", style="dim") if len(shown) > self.MAX_ROWS else Text("")
        return Group(header, best, table, more)

    def _rows(self) -> list[_TrialView]:
        """Running and paused trials; once none is left, the best finished ones."""
        views = list(self._trials.values())
        live = [v for v in views if v.status == TrialStatus.RUNNING] + [v for v in views if v.status == TrialStatus.PAUSED]
        return live or self._scored()[:5]

    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        super().setup(stop, num_samples, total_num_samples, **info)
        from rich.live import Live

        if self._live is None:
            self._live = Live(get_renderable=self.render, console=self._console, refresh_per_second=4,
                              redirect_stdout=True, redirect_stderr=True)
            self._live.start()

    def on_experiment_end(self, trials: Sequence[Any], **info: Any) -> None:
        super().on_experiment_end(trials, **info)
        self.close()

    def on_note(self, text: str, **info: Any) -> None:
        self._console.print(text, markup=False, highlight=False)  # above the live table

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.refresh()
            live.stop()


def make_progress(kind: str, name: str, metric: str | None, mode: str | None,
                  searched: Sequence[str] = ()) -> SweepProgress | None:
    """``kind``: 'auto' (live table on a terminal, else plain lines), 'live', 'plain' or 'none'."""
    if kind == "none":
        return None
    if kind == "auto":
        kind = "live" if sys.stdout.isatty() else "plain"
    cls = LiveTable if kind == "live" else PlainProgress
    return cls(name, metric, mode, searched)
