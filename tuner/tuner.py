"""``tune.Tuner``: Ray Tune's recommended front door, on the same engine as ``tune.run``.

``Tuner(trainable, param_space=..., tune_config=TuneConfig(...), run_config=RunConfig(...)).fit()``
is ``tune.run`` with the arguments gathered in config objects; it returns a :class:`ResultGrid`
instead of raising when trials fail. The Tuner's configuration is kept in the sweep's store, so
``Tuner.restore(path, trainable)`` continues an interrupted sweep through ``tune.run``'s resume.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
from pathlib import Path
from typing import Any, Mapping

import ray

from tuner.result_grid import ResultGrid
from tuner.run_options import RunOptions
from tuner.store import Store, default_database_url
from tuner.tune_config import ConfigError, RunConfig, TuneConfig, default_sweep_name

logger = logging.getLogger(__name__)

_STATE_KEY = "tuner"  # experiment_state key of the pickled (param_space, tune_config, run_config)


class Tuner:
    """Runs a sweep of ``trainable`` over ``param_space`` (Ray Tune's ``Tuner``).

    Example:
        >>> from tuner import tune
        >>> def train(config):
        ...     for i in range(3):
        ...         tune.report({"score": config["x"] * i})
        >>> grid = tune.Tuner(                                                  # doctest: +SKIP
        ...     train, param_space={"x": tune.grid_search([1, 2])},
        ...     tune_config=tune.TuneConfig(metric="score", mode="max"),
        ...     run_config=tune.RunConfig(storage_path="/tmp/tuner_doc", name="doc"),
        ... ).fit()
        >>> grid.get_best_result().config                                       # doctest: +SKIP
        {'x': 2}
    """

    def __init__(
        self,
        trainable: Any = None,
        *,
        param_space: Mapping[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_config: RunConfig | None = None,
    ) -> None:
        if trainable is None:
            raise ValueError("trainable: a function, a tune.Trainable subclass or a registered name is needed")
        if param_space is not None and not isinstance(param_space, Mapping):
            raise ConfigError(f"param_space must be a dict (the search space), got {type(param_space).__name__}")
        if tune_config is not None and not isinstance(tune_config, TuneConfig):
            raise ConfigError(f"tune_config must be a tune.TuneConfig, got {type(tune_config).__name__}")
        if run_config is not None and not isinstance(run_config, RunConfig):
            raise ConfigError(f"run_config must be a tune.RunConfig, got {type(run_config).__name__}")
        self._trainable = trainable
        self._param_space = dict(param_space or {})
        self._tune_config = tune_config or TuneConfig()
        self._run_config = run_config or RunConfig()
        self._resume: bool | str = False
        self._experiment_path: str | None = None

    # -- running ---------------------------------------------------------------------------------
    def fit(self) -> ResultGrid:
        """Run the sweep (or, after ``Tuner.restore``, continue it) and return its results.

        Trials that fail are in the results (``ResultGrid.errors``), not raised; an error of the
        sweep itself (a bad argument, ``fail_fast="raise"``) is. Interrupted (Ctrl-C), it stops
        the trials, keeps what they stored, says how to continue and returns the results so far,
        as Ray Tune does.
        """
        from tuner.api import DEFAULT_STORAGE_PATH, local_root, resolve_trainable
        from tuner.storage import open_storage

        rc = self._run_config
        name = rc.name or default_sweep_name(resolve_trainable(self._trainable).__name__)
        path = str(local_root(open_storage(rc.storage_path or DEFAULT_STORAGE_PATH, rc.storage_filesystem)) / name)
        try:
            analysis = self._run(name)
        except KeyboardInterrupt as interrupt:
            self._experiment_path = path
            try:
                grid = self.get_results()
            except Exception:  # noqa: BLE001 - interrupted before the sweep was stored
                raise interrupt from None
            logger.warning("The sweep was interrupted; what it stored is kept. Continue it with "
                           "Tuner.restore(%r, trainable=...).fit()", path)
            return grid
        self._experiment_path = analysis.experiment_path
        return ResultGrid(analysis)

    def _run(self, name: str) -> Any:
        from tuner.api import run_sweep

        tc, rc = self._tune_config, self._run_config
        assert rc.checkpoint_config is not None and rc.failure_config is not None
        assert not isinstance(tc.time_budget_s, datetime.timedelta)  # TuneConfig keeps it in seconds
        options = RunOptions(
            config=self._param_space,
            num_samples=tc.num_samples,
            metric=tc.metric,
            mode=tc.mode,
            scheduler=tc.scheduler,
            search_alg=tc.search_alg,
            stop=rc.stop,
            time_budget_s=tc.time_budget_s,
            max_concurrent_trials=tc.max_concurrent_trials,
            max_failures=rc.failure_config.max_failures,
            fail_fast=rc.failure_config.fail_fast,
            checkpoint_config=rc.checkpoint_config,
            storage_path=rc.storage_path,
            storage_filesystem=rc.storage_filesystem,
            database_url=rc.database_url,
            name=name,
            verbose=1 if rc.verbose is None else rc.verbose,
            raise_on_failed_trial=False,
            resume=self._resume,
            callbacks=rc.callbacks,
            tensorboard=rc.tensorboard,
            tensorboard_dir=rc.tensorboard_dir,
            reuse_actors=tc.reuse_actors,
            pack_trials=tc.pack_trials,
            trial_name_creator=tc.trial_name_creator,
            trial_dirname_creator=tc.trial_dirname_creator,
        )
        return run_sweep(self._trainable, options, tuner_state=self._state_blob())

    def get_results(self) -> ResultGrid:
        """The results of the sweep this Tuner ran or was restored from, read from its store."""
        from tuner.analysis import ExperimentAnalysis

        path = self._experiment_path
        if path is None:
            raise RuntimeError("get_results: this Tuner has not been fit (call fit(), or Tuner.restore a sweep)")
        return ResultGrid(ExperimentAnalysis(path, database_url=self._run_config.database_url,
                                             default_metric=self._tune_config.metric,
                                             default_mode=self._tune_config.mode))

    # -- restoring -------------------------------------------------------------------------------
    @classmethod
    def restore(
        cls,
        path: str | os.PathLike[str],
        trainable: Any,
        resume_unfinished: bool = True,
        resume_errored: bool = False,
        restart_errored: bool = False,
        param_space: Mapping[str, Any] | None = None,
        *,
        database_url: str | None = None,
    ) -> "Tuner":
        """A Tuner that continues the sweep stored at ``path`` (``<storage_path>/<name>``) on ``fit()``.

        Finished trials are kept; interrupted ones go on from their last checkpoint; the searcher
        and scheduler continue from their stored state. ``resume_errored`` retries failed trials
        from their last checkpoint, ``restart_errored`` from scratch. ``trainable`` is given again
        (as in Ray Tune: its code is not stored); ``param_space`` may be given again too (it must
        describe the same space). ``database_url``: the sweep's database, when it is not the
        SQLite file in ``path``.
        """
        if not resume_unfinished:
            raise ValueError("resume_unfinished=False is not supported: unfinished trials always resume")
        if resume_errored and restart_errored:
            raise ValueError("resume_errored and restart_errored: pick one (resume from the last checkpoint, or restart)")
        run_dir = Path(path).expanduser().absolute()
        blob = _load_state(run_dir, database_url)
        if blob is None:
            raise ValueError(
                f"path: no sweep run by Tuner.fit at {str(run_dir)!r}; a sweep started with tune.run is "
                f"resumed with tune.run(..., name={run_dir.name!r}, resume=True)"
            )
        stored_space, tune_config, run_config = ray.cloudpickle.loads(blob)
        run_config = dataclasses.replace(
            run_config, name=run_dir.name, storage_path=str(run_dir.parent), database_url=database_url,
        )
        tuner = cls(trainable, param_space=stored_space if param_space is None else param_space,
                    tune_config=tune_config, run_config=run_config)
        tuner._resume = "RESTART_ERRORED" if restart_errored else "ERRORED_ONLY" if resume_errored else True
        tuner._experiment_path = str(run_dir)
        return tuner

    @classmethod
    def can_restore(cls, path: str | os.PathLike[str], *, database_url: str | None = None) -> bool:
        """Whether ``path`` holds a sweep that ``Tuner.restore`` can continue."""
        try:
            return _load_state(Path(path).expanduser().absolute(), database_url) is not None
        except Exception:  # noqa: BLE001 - not a tuner database, unreadable, ...: nothing to restore
            return False

    def _state_blob(self) -> bytes | None:
        """The pickled configuration ``Tuner.restore`` rebuilds this Tuner from (callbacks that
        cannot be pickled are left out, with a warning; the database URL is never kept)."""
        run_config = dataclasses.replace(self._run_config, database_url=None)
        for attempt in (run_config, dataclasses.replace(run_config, callbacks=None)):
            try:
                return ray.cloudpickle.dumps((self._param_space, self._tune_config, attempt))
            except Exception as exc:  # noqa: BLE001
                error = exc
                if attempt.callbacks is not None and attempt is run_config:
                    logger.warning("Tuner: the callbacks cannot be pickled (%s); Tuner.restore will run without them", exc)
        logger.warning("Tuner: its configuration cannot be pickled (%s); Tuner.restore will not work", error)
        return None


def _load_state(run_dir: Path, database_url: str | None) -> bytes | None:
    if database_url is None and not (run_dir / "tuner.db").is_file():
        return None
    from tuner.relocation import find_sweep

    with Store(database_url or default_database_url(run_dir), create=False) as store:
        experiment, _ = find_sweep(store, run_dir, own_store=database_url is None)  # moved or copied too
        if experiment is None:
            return None
        return store.load_state(int(experiment["id"]), _STATE_KEY)


__all__ = ["Tuner"]
