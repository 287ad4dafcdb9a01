"""The live TensorBoard HParams export: a ``tune.Callback`` the controller feeds.

Trials never write TensorBoard files: the driver does, so trials on remote nodes land in one logdir.

* session start (a trial's config, nested keys dotted) when the trial first starts;
* one event of scalars per result, at step ``training_iteration``: every numeric value of the
  result (nested dicts flattened with ``/``, bools as 0/1), not the bookkeeping keys
  (:data:`NOT_METRICS`); strings, None and other values are left out of that step, so a metric
  column stays numeric;
* session end when the trial ends for good: ``success`` (finished, stopped by a stop condition or a
  scheduler) or ``failure``; a trial still running has none yet (TensorBoard shows "Unknown"):
  TensorBoard keeps the first session end it reads, so a "running" end could never be replaced;
* the experiment summary at the root: every hparam of the search space with its domain (see
  :mod:`tuner.tensorboard.domains`), hparams found in configs only (conditional spaces), and the
  metrics: the tune metric and every metric reported. TensorBoard shows only the metrics the
  experiment summary declares (empty means none, not "infer them") and a running server keeps the
  first experiment summary it reads, so it is written once the metrics are likely all known: when
  the first trial ends, or a minute after the first result, whichever comes first; until then the
  plugin infers the columns from the runs (all metrics, domains from the values seen). It is
  rewritten (file replaced) when new metric or hparam names turn up, for TensorBoard servers
  started afterwards, and at the end of the sweep; an identical summary is not rewritten.

The hooks only queue what they are given: one export thread of the driver builds and writes the
summaries, so a result waits on no file before the scheduler's decision. That thread wakes every
:data:`BATCH_S` at most, writes what was queued and flushes it, and flushes at each trial's end; ``on_experiment_end`` waits until
everything is written. On a resume (``setup(resumed=True)``) the logdir is read back: trials that
have a session get no second session start, steps already written are not written again, a failed
trial that runs again loses its old session end, and the experiment summary keeps its creation time
and the metrics it declared (rewritten only if something changed).
"""

from __future__ import annotations

import collections
import errno
import logging
import numbers
import os
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

from tuner.callback import Callback
from tuner.flatten import flat_result
from tuner.tensorboard import logdir as files
from tuner.tensorboard import summaries
from tuner.tensorboard.domains import describe_search_space, flatten_config, hparam_value, value_dtype

logger = logging.getLogger(__name__)

#: Result keys that are bookkeeping, not metrics (unless one is the tune metric).
NOT_METRICS = frozenset({"timestamp", "done", "trial_id", "iterations_since_restore", "pid"})
_PLAIN_NUMBERS = (float, int, bool)  # checked before the slower isinstance(numbers.Real)
#: The export thread writes what was queued in batches, this far apart at most.
BATCH_S = 0.2
#: The experiment summary is first written when a trial ends or this long after the first result.
ROOT_DELAY_S = 60.0
#: A changed experiment summary is rewritten at most this often while results come in.
ROOT_REWRITE_S = 10.0


class _Run:
    __slots__ = ("started", "ended", "max_step", "last_step")

    def __init__(self) -> None:
        self.started = False
        self.ended: str | None = None
        self.max_step = -1  # last step on disk before this process (resume)
        self.last_step = 0


def _storage_failure(exc: BaseException | None) -> bool:
    """Whether the sweep ended because its storage failed (its own error line says so)."""
    from tuner.errors import StorageFullError
    from tuner.store import StoreError

    return isinstance(exc, (StorageFullError, StoreError))


class TensorBoardExporter(Callback):
    """Writes the sweep to ``logdir`` for TensorBoard's HParams dashboard (see the module doc).

    ``tune.run`` adds one (``tensorboard=True``, the default; ``tensorboard_dir`` defaults to
    ``<run_dir>/tensorboard``). ``hparam_domains`` is :func:`describe_search_space` of the search
    space; without it the exporter describes ``setup``'s ``search_space``.
    """

    def __init__(self, logdir: str | os.PathLike[str], *, hparam_domains: Sequence[Mapping[str, Any]] | None = None,
                 flush_secs: float = 1.0, max_open_writers: int = 64) -> None:
        self.logdir = Path(logdir).expanduser().absolute()
        self._given_domains = None if hparam_domains is None else [dict(e) for e in hparam_domains]
        self._flush_secs = float(flush_secs)
        self._max_open = max(1, int(max_open_writers))
        self._metric: str | None = None
        self._entries: dict[str, dict[str, Any]] = {}
        self._observed: dict[str, set[str]] = {}
        self._metrics: dict[str, None] = {}
        self._runs: dict[str, _Run] = {}
        self._writers: collections.OrderedDict[str, files.RunWriter] = collections.OrderedDict()
        self._time_created = time.time()
        self._root_content: bytes | None = None
        self._root_written = False
        self._root_at = 0.0
        self._first_result_at: float | None = None
        self._dirty = False
        self._live = True
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # a fresh one at each setup; used while _thread runs
        self._thread: threading.Thread | None = None
        self._ending = threading.Event()
        self._disk_full: OSError | None = None  # the export stopped on a full disk (said at the end)

    # -- tune.Callback hooks: the controller's thread only queues; the export thread writes ---------
    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        self.begin(metric=info.get("metric"), search_space=info.get("search_space"),
                   resumed=bool(info.get("resumed")))
        self._queue = queue.SimpleQueue()
        self._ending.clear()
        self._thread = threading.Thread(target=self._work, name="tuner-tensorboard-export", daemon=True)
        self._thread.start()

    def on_trial_start(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        self._submit(self.start_session, trial.trial_name, dict(trial.config), time.time())

    def on_trial_result(self, iteration: int, trials: Sequence[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        self._submit(self._on_result, trial.trial_name, trial.config, result)

    def on_trial_complete(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        self._submit(self.end_session, trial.trial_name, "success", time.time())

    def on_trial_error(self, iteration: int, trials: Sequence[Any], trial: Any, **info: Any) -> None:
        self._submit(self.end_session, trial.trial_name, "failure", time.time())

    def on_experiment_end(self, trials: Sequence[Any], **info: Any) -> None:
        """Waits until everything queued is written, flushed and closed; then says why the export
        stopped early, if it did on a full disk, unless the sweep's own error says so (``ended_by``)."""
        thread, self._thread = self._thread, None
        if thread is None:
            self.close()
        else:
            self._queue.put(None)
            self._ending.set()
            thread.join()
        full, self._disk_full = self._disk_full, None
        ended_by = info.get("ended_by")
        if full is not None and not _storage_failure(ended_by):
            self._say_stopped(full)

    def _submit(self, fn: Any, *args: Any) -> None:
        if self._thread is None:  # not set up by a controller: write at once
            fn(*args)
        else:
            self._queue.put((fn, args))

    def _work(self) -> None:
        """The export thread: wakes at most every :data:`BATCH_S`, writes everything queued, flushes.

        Waking once per queued item would make it take the GIL from the controller's thread
        hundreds of times a second on a fast sweep; in batches it costs the sweep almost nothing,
        and what is written still reaches disk within about ``BATCH_S``.
        """
        failed: set[str] = set()
        done = False
        stopped = False  # the logdir cannot be written (a full disk, a read-only one): export no more
        while not done:
            item = self._queue.get()
            while True:
                if item is None:
                    done = True
                    break
                fn, args = item
                try:
                    if not stopped:
                        fn(*args)
                except OSError as exc:
                    stopped = self._stop_export(exc)
                except Exception as exc:  # noqa: BLE001 - the export must not take the sweep down
                    if fn.__name__ not in failed:
                        failed.add(fn.__name__)
                        logger.error("TensorBoard export to %s failed in %s: %r (the sweep goes on)",
                                     self.logdir, fn.__name__, exc, exc_info=exc)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            try:
                if not stopped:
                    self._flush_all()
            except OSError as exc:
                stopped = self._stop_export(exc)
            if not done:
                self._ending.wait(BATCH_S)
        try:
            if stopped:
                self._abandon_writers()
            else:
                self.close()
        except OSError as exc:
            if not stopped:
                self._stop_export(exc)
        except Exception as exc:  # noqa: BLE001
            logger.error("TensorBoard export to %s failed while closing: %r", self.logdir, exc, exc_info=exc)

    def _stop_export(self, exc: OSError) -> bool:
        """Say once, in one line, that the logdir cannot be written and the export stops (the
        store still has every result: the logs can be rebuilt from it). A full disk is said at
        the sweep's end: it most likely ends the sweep too, whose own line then says it."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            self._disk_full = exc
        else:
            self._say_stopped(exc)
        return True

    def _say_stopped(self, exc: OSError) -> None:
        logger.warning("TensorBoard export to %s stopped: %s; tuner.export_tensorboard rebuilds it from the store",
                       self.logdir, exc.strerror or exc)

    def _abandon_writers(self) -> None:
        """Close the event files without writing what they hold (the logdir takes no writes)."""
        while self._writers:
            self._writers.popitem()[1].discard()

    def _on_result(self, name: str, config: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        run = self._runs.get(name)
        if run is None or not run.started:  # a result of a trial whose start was not seen
            self.start_session(name, config)
        self.add_result(name, result)

    # -- the export (also driven by tuner.export_tensorboard) --------------------------------------
    def begin(self, *, metric: str | None, search_space: Any = None, resumed: bool = False,
              time_created: float | None = None, live: bool = True) -> None:
        """Start (or, with ``resumed``, continue) the export of a sweep into the logdir; with
        ``live=False`` (a rebuild) the experiment summary is only written by :meth:`close`."""
        self._live = live
        self._metric = metric
        if metric:
            self._metrics[metric] = None
        domains = self._given_domains
        if domains is None:
            domains = describe_search_space(search_space if isinstance(search_space, Mapping) else None)
        self._entries = {e["name"]: dict(e) for e in domains if e.get("name")}
        if time_created is not None:
            self._time_created = float(time_created)
        self.logdir.mkdir(parents=True, exist_ok=True)
        if resumed:
            self._adopt_logdir()

    def start_session(self, name: str, config: Mapping[str, Any], start_time: float | None = None) -> None:
        """A trial started: write its session start, unless its run already has one."""
        run = self._runs.setdefault(name, _Run())
        if run.started:
            if run.ended is not None:  # ended, and running again (a failed trial retried by a resume)
                self._close_writer(name)
                self._writers[name] = files.drop_session_end(self.logdir / name, self._flush_secs)
                run.ended = None
            return
        hparams = {}
        for key, value in flatten_config(config or {}).items():
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = {"name": key, "kind": "none", "dtype": None, "searched": True}
                self._dirty = True
            converted = hparam_value(value, entry.get("dtype"))
            if entry.get("dtype") is None:
                self._observe(key, converted)
            hparams[key] = converted
        start_time = time.time() if start_time is None else float(start_time)
        self._writer(name).add(summaries.event(summaries.session_start(hparams, name, start_time), 0, start_time))
        run.started = True

    def add_result(self, name: str, result: Mapping[str, Any]) -> None:
        """One result of a started trial: its numeric values, at step ``training_iteration``."""
        run = self._runs.get(name)
        if run is None or not run.started or run.ended is not None:
            return
        iteration = result.get("training_iteration")
        # typeshed's numbers.Real declares no __int__, though int() takes every Real (by __trunc__)
        step = int(iteration) if isinstance(iteration, numbers.Real) else run.last_step + 1  # type: ignore[call-overload]
        run.last_step = step
        if step <= run.max_step:
            return  # on disk already (written before a resume)
        flat = flat_result(result)
        values = []
        metrics = self._metrics
        for key, value in flat.items():
            if (type(value) not in _PLAIN_NUMBERS and not isinstance(value, numbers.Real)) or (
                    (key in NOT_METRICS or key[:1] == "_") and key != self._metric):
                continue
            values.append((key, float(value)))
            if key not in metrics:
                metrics[key] = None
                self._dirty = True
        if not values:
            return
        writer = self._writer(name)
        wall_time = result.get("timestamp")
        wall_time = float(wall_time) if isinstance(wall_time, numbers.Real) else time.time()
        writer.add(summaries.scalars_event(values, step, wall_time, writer.tags_with_metadata))
        now = time.monotonic()
        if self._first_result_at is None:
            self._first_result_at = now
        if self._dirty and self._live and (
            (self._root_written and now - self._root_at >= ROOT_REWRITE_S)
            or (not self._root_written and now - self._first_result_at >= ROOT_DELAY_S)
        ):
            self.write_experiment()

    def end_session(self, name: str, status: str, end_time: float | None = None) -> None:
        """A trial ended for good with ``status`` "success" or "failure"."""
        run = self._runs.get(name)
        if run is None or not run.started or run.ended is not None:
            return  # never started (stopped while pending), or its end is written already
        end_time = time.time() if end_time is None else float(end_time)
        self._writer(name).add(summaries.event(summaries.session_end(status, end_time), run.last_step, end_time))
        run.ended = status
        self._close_writer(name)
        if self._live and (not self._root_written or self._dirty):
            self.write_experiment()

    def close(self) -> None:
        """Flush and close every file, and write the experiment summary if it changed."""
        while self._writers:
            self._close_writer(next(iter(self._writers)))
        if not self._root_written or self._dirty:
            self.write_experiment()

    def write_experiment(self) -> None:
        """(Re)write the experiment summary at the root; nothing is written if it is unchanged."""
        metric = self._metric
        names = ([metric] if metric else []) + sorted(m for m in self._metrics if m != metric)
        summary = summaries.experiment(self._entries.values(), self._observed, names, self._time_created)
        data = summaries.content(summary)
        if data != self._root_content:
            files.replace_root(self.logdir, summary, wall_time=time.time())
            self._root_content = data
        self._root_written = True
        self._root_at = time.monotonic()
        self._dirty = False

    # -- internals -------------------------------------------------------------------------------
    def _observe(self, key: str, value: Any) -> None:
        kind = value_dtype(value)
        if kind is not None:
            seen = self._observed.setdefault(key, set())
            if kind not in seen:
                seen.add(kind)
                self._dirty = True

    def _writer(self, name: str) -> files.RunWriter:
        writer = self._writers.get(name)
        if writer is not None:
            self._writers.move_to_end(name)
            return writer
        if len(self._writers) >= self._max_open:
            # Close the least recently used files, of those opened in an earlier second: a run
            # opened again gets a new file, which must sort after its last one (see RunWriter).
            now = int(time.time())
            for old in [n for n, w in self._writers.items() if w.created_second < now]:
                if len(self._writers) < self._max_open:
                    break
                self._close_writer(old)
        writer = self._writers[name] = files.RunWriter(self.logdir / name, self._flush_secs)
        return writer

    def _flush_all(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def _close_writer(self, name: str) -> None:
        writer = self._writers.pop(name, None)
        if writer is not None:
            writer.close()

    def _adopt_logdir(self) -> None:
        """Read back what an earlier run of this sweep wrote (on a resume)."""
        data = files.read_experiment(self.logdir)
        if data is not None:
            try:
                experiment = summaries.parse_experiment(data)
            except Exception as exc:  # noqa: BLE001 - an unreadable summary is replaced
                logger.warning("TensorBoard export: cannot read the experiment summary in %s: %s", self.logdir, exc)
            else:
                self._root_content = data
                self._root_written = True
                if experiment.time_created_secs:
                    self._time_created = experiment.time_created_secs
                for info in experiment.metric_infos:
                    if not info.name.group:
                        self._metrics.setdefault(info.name.tag, None)
                for info in experiment.hparam_infos:
                    if info.name not in self._entries:
                        self._entries[info.name] = {"name": info.name, "kind": "none", "dtype": None,
                                                    "searched": True}
                        kind = summaries.TYPE_NAMES.get(info.type)
                        if kind:
                            self._observed.setdefault(info.name, set()).add(kind)
        for entry in sorted(os.scandir(self.logdir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            state = files.scan_run(entry.path)
            if state.started:
                run = self._runs.setdefault(entry.name, _Run())
                run.started = True
                run.ended = state.end_status
                run.max_step = state.max_step
                run.last_step = max(state.max_step, 0)
