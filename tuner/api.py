"""``tune.run``: validate the experiment once, then hand it to the controller."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import ray

from schedulers.trial_scheduler import ERROR, FIFOScheduler, TrialScheduler, validate_mode
from tuner.analysis import ExperimentAnalysis
from tuner.callback import Callback, CallbackList
from tuner.errors import TuneError
from tuner.execution import signals
from tuner.execution.checkpoint_manager import CheckpointManager
from tuner.execution.controller import Controller
from tuner.execution.profiler import SweepProfiler, save_profile
from tuner.execution.progress import ProgressReporter
from tuner.execution.resources import PlacementGroupFactory, to_placement_group_factory
from tuner.execution.resume import load_sweep, validate_resume
from tuner.execution.sweep_lock import SweepLock
from tuner.execution.trial_naming import TrialNamer
from tuner.ray_session import check_ray_address, ensure_ray
from tuner.registry import get_trainable
from tuner.search.basic_variant import BasicVariantGenerator
from tuner.search.searcher import Searcher
from tuner.stopper import to_stopper
from tuner.store import Store, default_database_url, mask_url
from tuner.tensorboard.domains import describe_search_space
from tuner.trainable.function_trainable import FunctionTrainable, wrap_function
from tuner.trainable.trainable import Trainable
from tuner.tune_config import (
    SWEEP_NAME_RULE,
    CheckpointConfig,
    check_fail_fast,
    checkpoint_settings,
    default_sweep_name,
    is_sweep_name,
)

DEFAULT_STORAGE_PATH = "~/tuner_results"

logger = logging.getLogger(__name__)


def _check_int(value: Any, field: str, minimum: int, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field} must be an int >= {minimum}{' or None' if allow_none else ''}, got {value!r}")


def resolve_trainable(trainable: Any) -> type[Trainable]:
    """A Trainable class for a Trainable class, a function, or a registered name."""
    if isinstance(trainable, str):
        trainable = get_trainable(trainable)
    if inspect.isclass(trainable):
        if issubclass(trainable, Trainable):
            return trainable
        raise ValueError(
            f"run_or_experiment: class {trainable.__name__} is not a tune.Trainable subclass"
        )
    if inspect.iscoroutinefunction(trainable):
        raise ValueError(
            f"run_or_experiment: {getattr(trainable, '__name__', trainable)!r} is an async function; pass a plain "
            f"function (it may call asyncio.run) or a tune.Trainable subclass"
        )
    if callable(trainable):
        return wrap_function(trainable)
    raise ValueError(
        f"run_or_experiment must be a function, a tune.Trainable subclass or a registered name, "
        f"got {type(trainable).__name__}"
    )


def _resources_for(trainable_cls: type[Trainable], resources_per_trial: Any) -> Callable[[dict[str, Any]], PlacementGroupFactory]:
    if resources_per_trial is not None:
        fixed = to_placement_group_factory(resources_per_trial)
        return lambda config: fixed
    if trainable_cls.default_resource_request is Trainable.default_resource_request:
        default = to_placement_group_factory(None)
        return lambda config: default

    def per_config(config: dict[str, Any]) -> PlacementGroupFactory:
        request = trainable_cls.default_resource_request(config)
        return to_placement_group_factory(request, field=f"{trainable_cls.__name__}.default_resource_request")

    return per_config


def _validate_arguments(
    trainable_cls: type[Trainable], *, config: Any, num_samples: Any, metric: Any, mode: Any,
    scheduler: Any, search_alg: Any, time_budget_s: Any, max_concurrent_trials: Any, max_failures: Any,
    checkpoint_freq: Any, checkpoint_at_end: Any, name: Any, seed: Any, tensorboard: Any = True,
    tensorboard_dir: Any = None,
) -> None:
    """Raise one ValueError naming the first bad argument of tune.run; nothing is written before."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (the search space), got {type(config).__name__}")
    _check_int(num_samples, "num_samples", 1)
    validate_mode(mode)
    if metric is not None and not isinstance(metric, str):
        raise ValueError(f"metric must be a string, got {metric!r}")
    if (metric is None) != (mode is None):
        raise ValueError(f"metric and mode go together: got metric={metric!r}, mode={mode!r}")
    if scheduler is not None and not isinstance(scheduler, TrialScheduler):
        raise ValueError(f"scheduler must be a TrialScheduler, got {type(scheduler).__name__}")
    if search_alg is not None and not isinstance(search_alg, Searcher):
        raise ValueError(f"search_alg must be a Searcher, got {type(search_alg).__name__}")
    if time_budget_s is not None and (isinstance(time_budget_s, bool) or not isinstance(time_budget_s, (int, float)) or time_budget_s <= 0):
        raise ValueError(f"time_budget_s must be a number of seconds > 0 or None, got {time_budget_s!r}")
    _check_int(max_concurrent_trials, "max_concurrent_trials", 1, allow_none=True)
    _check_int(max_failures, "max_failures", -1)
    _check_int(checkpoint_freq, "checkpoint_freq", 0)
    if checkpoint_freq and issubclass(trainable_cls, FunctionTrainable):
        raise ValueError(
            "checkpoint_freq: a function trainable checkpoints itself through "
            "tune.report(..., checkpoint=...); checkpoint_freq is for Trainable classes"
        )
    if not isinstance(checkpoint_at_end, bool):
        raise ValueError(f"checkpoint_at_end must be True or False, got {checkpoint_at_end!r}")
    if name is not None and not is_sweep_name(name):
        raise ValueError(f"name must be {SWEEP_NAME_RULE}, got {name!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an int or None, got {seed!r}")
    if not isinstance(tensorboard, bool):
        raise ValueError(f"tensorboard must be True or False, got {tensorboard!r}")
    if tensorboard_dir is not None and (
        not isinstance(tensorboard_dir, (str, os.PathLike)) or not os.fspath(tensorboard_dir)
    ):
        raise ValueError(f"tensorboard_dir must be a path (str or os.PathLike) or None, got {tensorboard_dir!r}")


def _check_writable_dir(path: Path, field: str) -> None:
    """Raise one ValueError naming ``field`` unless ``path`` is a directory this process can write
    into, or one it can create. Permission bits say nothing when running as root, so the test is
    a real one: an empty directory made and removed in the nearest existing ancestor."""
    existing = path
    try:
        while not existing.exists():
            existing = existing.parent
    except OSError as exc:  # an ancestor this user may not look into
        raise ValueError(f"{field}: cannot use {path} ({exc.strerror or exc})") from None
    if not existing.is_dir():
        where = "is a file" if existing == path else f"is inside {existing}, which is a file"
        raise ValueError(f"{field}: {path} {where}; expected a directory (created if missing)")
    try:
        probe = tempfile.mkdtemp(prefix=".tuner-write-check-", dir=existing)
    except OSError as exc:
        raise ValueError(
            f"{field}: cannot write into {existing} ({(exc.strerror or str(exc)).lower()}); "
            f"expected a directory this user can write (created if missing)"
        ) from None
    with contextlib.suppress(OSError):  # the directory could be made: that was the question
        os.rmdir(probe)


def _check_can_run(storage_path: Any, name: Any, tensorboard: Any, tensorboard_dir: Any) -> None:
    """Raise one clear error, before anything is written, when the sweep could not be stored where
    it is asked to (``storage_path``, ``tensorboard_dir``) or the Ray it is to join does not answer."""
    if storage_path is not None and (not isinstance(storage_path, (str, os.PathLike)) or not os.fspath(storage_path)):
        raise ValueError(f"storage_path must be a path (str or os.PathLike) or None, got {storage_path!r}")
    root = Path(storage_path or DEFAULT_STORAGE_PATH).expanduser().absolute()
    _check_writable_dir(root, "storage_path")
    if isinstance(name, str):
        run_dir = root / name
        if run_dir.exists() and not run_dir.is_dir():
            raise ValueError(f"name: {run_dir} (the sweep's run directory) is a file; pick another name")
        if run_dir.is_dir():  # a resumed sweep writes into its own directory
            _check_writable_dir(run_dir, "storage_path")
    if tensorboard and tensorboard_dir is not None:
        _check_writable_dir(Path(tensorboard_dir).expanduser().absolute(), "tensorboard_dir")
    check_ray_address()


def _hparam_domains(config: Mapping[str, Any], searcher: Searcher) -> list[dict[str, Any]]:
    """The hparams and domains the TensorBoard export shows (stored in the spec for a rebuild):
    tune.run's search space, or the searcher's own when it was given one."""
    space: Any = config
    if not config:  # OptunaSearch(space={...}): its space, "a/b" keys expanded into nested dicts
        own = getattr(searcher, "_template", None) or getattr(searcher, "_space_source", None)
        space = own if isinstance(own, Mapping) else {}
    try:
        return describe_search_space(space)
    except Exception:  # noqa: BLE001 - the export then finds the hparams in the trials' configs
        logger.warning("cannot describe the search space for TensorBoard; hparams are taken from configs",
                       exc_info=True)
        return []


def _rebuild_tensorboard(run_dir: Path, url: str, tb_dir: Path) -> None:
    from tuner.tensorboard.rebuild import export_tensorboard

    try:
        export_tensorboard(run_dir, database_url=url, logdir=tb_dir)
    except Exception:  # noqa: BLE001 - the live export still shows the trials that run from now on
        logger.warning("cannot rebuild the TensorBoard logdir %s from the store", tb_dir, exc_info=True)


def _sigterm_as_interrupt(fn: Callable[..., ExperimentAnalysis]) -> Callable[..., ExperimentAnalysis]:
    """SIGTERM during the call stops the sweep as Ctrl-C does (see ``tuner.execution.signals``);
    one that arrives as the sweep ends is raised once everything is saved."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> ExperimentAnalysis:
        with signals.graceful_sigterm():
            analysis = fn(*args, **kwargs)
            signals.raise_if_terminated()
        return analysis

    return wrapper


@_sigterm_as_interrupt
def run(
    run_or_experiment: Any,
    *,
    config: Mapping[str, Any] | None = None,
    num_samples: int = 1,
    metric: str | None = None,
    mode: str | None = None,
    scheduler: TrialScheduler | None = None,
    search_alg: Searcher | None = None,
    stop: Any = None,
    time_budget_s: float | None = None,
    resources_per_trial: Any = None,
    max_concurrent_trials: int | None = None,
    max_failures: int = 0,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    storage_path: str | os.PathLike[str] | None = None,
    database_url: str | None = None,
    name: str | None = None,
    seed: int | None = None,
    verbose: int = 1,
    raise_on_failed_trial: bool = True,
    resume: bool | str = False,
    callbacks: Sequence[Callback] | None = None,
    tensorboard: bool = True,
    tensorboard_dir: str | os.PathLike[str] | None = None,
    checkpoint_config: CheckpointConfig | None = None,
    keep_checkpoints_num: int | None = None,
    checkpoint_score_attr: str | None = None,
    fail_fast: bool | str = False,
    reuse_actors: bool | None = None,
    trial_name_creator: Callable[[Any], str] | None = None,
    trial_dirname_creator: Callable[[Any], str] | None = None,
    _tuner_state: bytes | None = None,
) -> ExperimentAnalysis:
    """Run a sweep of ``run_or_experiment`` over ``config`` and return its analysis.

    Trials run concurrently as Ray actors, one placement group each; every result is stored in
    SQL (a SQLite file in ``storage_path/name`` unless ``database_url`` names another database).
    ``resume=True`` continues the stored sweep of that name (finished trials are kept, interrupted
    ones restart from their last checkpoint, the searcher and scheduler go on from their stored
    state); ``"ERRORED_ONLY"`` also retries the trials that failed (from their last checkpoint),
    ``"RESTART_ERRORED"`` from scratch; ``"AUTO"`` resumes if the sweep exists and starts it otherwise.

    Ctrl-C (KeyboardInterrupt) and SIGTERM stop the trials where they are and leave the sweep
    resumable: running trials are stored as INTERRUPTED with every result received so far, the
    sweep too. SIGTERM then raises :class:`~tuner.execution.signals.SweepTerminated`, a
    ``SystemExit`` with code 143. A new sweep whose checks fail before any trial reported
    (resources that never fit, a bad trainer config, a metric no result holds) leaves nothing
    behind, so the corrected call can reuse the name.

    The sweep is exported live for TensorBoard's HParams dashboard into ``tensorboard_dir``
    (``<storage_path>/<name>/tensorboard`` by default; ``tensorboard --logdir`` it): one session per
    trial with its config, curves and end status, and the search space's domains;
    ``tensorboard=False`` turns the export off (``tuner.export_tensorboard`` rebuilds it later
    from the store).

    Checkpoints: ``checkpoint_config=tune.CheckpointConfig(num_to_keep=N, checkpoint_score_attribute=...,
    checkpoint_score_order=...)`` keeps each trial's N best checkpoints on disk (Ray Tune's older
    ``keep_checkpoints_num`` and ``checkpoint_score_attr="min-loss"`` work too); every checkpoint,
    deleted or not, is on record in the store. ``fail_fast=True`` stops the sweep at the first trial
    that fails for good (``"raise"``: and raises its error). ``trial_name_creator`` and
    ``trial_dirname_creator`` name trials and their directories. ``reuse_actors`` is accepted for
    Ray Tune scripts: trial actors are always reused between trials of the same resources.

    Example:
        >>> from tuner import tune
        >>> def train(config):
        ...     for i in range(3):
        ...         tune.report({"score": config["x"] * i})
        >>> analysis = tune.run(train, config={"x": tune.grid_search([1, 2])}, metric="score",
        ...                     mode="max", storage_path="/tmp/tuner_doc", verbose=0)  # doctest: +SKIP
        >>> analysis.best_config                                                        # doctest: +SKIP
        {'x': 2}
    """
    called_at = time.monotonic()  # the sweep's profile counts engine start from here
    trainable_cls = resolve_trainable(run_or_experiment)
    config = {} if config is None else config
    ckpt = checkpoint_settings(
        checkpoint_config, keep_checkpoints_num=keep_checkpoints_num, checkpoint_score_attr=checkpoint_score_attr,
        checkpoint_freq=checkpoint_freq, checkpoint_at_end=checkpoint_at_end,
    )
    _validate_arguments(
        trainable_cls, config=config, num_samples=num_samples, metric=metric, mode=mode,
        scheduler=scheduler, search_alg=search_alg, time_budget_s=time_budget_s,
        max_concurrent_trials=max_concurrent_trials, max_failures=max_failures,
        checkpoint_freq=ckpt.frequency, checkpoint_at_end=ckpt.at_end, name=name, seed=seed,
        tensorboard=tensorboard, tensorboard_dir=tensorboard_dir,
    )
    _check_can_run(storage_path, name, tensorboard, tensorboard_dir)
    check_fail_fast(fail_fast, max_failures)
    if reuse_actors is not None and not isinstance(reuse_actors, bool):
        raise ValueError(f"reuse_actors must be True, False or None, got {reuse_actors!r}")
    namer = TrialNamer(trial_name_creator, trial_dirname_creator)
    resume = validate_resume(resume)
    callback_list = CallbackList(callbacks)
    stopper = to_stopper(stop)
    resources_for = _resources_for(trainable_cls, resources_per_trial)
    reporter = ProgressReporter(verbose=verbose, metric=metric, mode=mode)

    scheduler, searcher, innermost, max_trials = _prepare_search(
        scheduler, search_alg, metric=metric, mode=mode, config=config, num_samples=num_samples, seed=seed)

    name = name or default_sweep_name(trainable_cls.__name__)
    run_dir = Path(storage_path or DEFAULT_STORAGE_PATH).expanduser().absolute() / name
    tb_dir = Path(tensorboard_dir).expanduser().absolute() if tensorboard_dir is not None else run_dir / "tensorboard"
    hparam_domains = _hparam_domains(config, innermost)
    url = database_url or default_database_url(run_dir)
    if resume not in (False, "AUTO") and database_url is None and not (run_dir / "tuner.db").exists():
        raise ValueError(f"resume: there is no sweep named {name!r} under {run_dir.parent} to resume")
    # One driver per sweep, held where the sweep is stored: taken before the sweep is looked up or
    # anything is written, so two drivers racing on one sweep cannot both run it.
    lock = SweepLock(url, name, run_dir).acquire()
    # Looked at once this driver holds the sweep: what is there now is not this call's to remove.
    leftovers = _Leftovers(run_dir, tb_dir if tensorboard else None, in_database=database_url is not None)
    try:
        store = Store(url)
    except BaseException:
        lock.release()
        leftovers.remove_files()
        raise
    existing: dict[str, Any] | None = None
    experiment_id: int | None = None
    controller: Controller | None = None
    try:
        existing = _existing_sweep(store, name, resume)
        ray_began = time.monotonic()
        ensure_ray()
        signals.rearm()  # ray.init installs its own SIGTERM handler
        ray_start_s = time.monotonic() - ray_began
        spec = _sweep_spec(
            trainable_cls, config=config, num_samples=num_samples, metric=metric, mode=mode, scheduler=scheduler,
            searcher=searcher, stop=stop, time_budget_s=time_budget_s, resources_per_trial=resources_per_trial,
            max_concurrent_trials=max_concurrent_trials, max_failures=max_failures, ckpt=ckpt, fail_fast=fail_fast,
            seed=seed, run_dir=run_dir, url=url, hparam_domains=hparam_domains,
            tensorboard_dir=tb_dir if tensorboard else None,
        )
        if tensorboard:
            from tuner.tensorboard.exporter import TensorBoardExporter

            if existing is not None and not tb_dir.exists():  # resumed without its logs: rebuild them first
                _rebuild_tensorboard(run_dir, url, tb_dir)
            callback_list.add(TensorBoardExporter(tb_dir, hparam_domains=hparam_domains))
        experiment_id = store.get_or_create_experiment(name, spec=spec, metric=metric, mode=mode)
        if _tuner_state is not None:  # what Tuner.restore rebuilds the Tuner from
            store.save_state(experiment_id, "tuner", _tuner_state)
        checkpoints = CheckpointManager(
            store, experiment_id, str(run_dir), num_to_keep=ckpt.num_to_keep,
            score_attribute=ckpt.score_attribute, score_order=ckpt.score_order,
        )
        profiler = SweepProfiler(
            total_cpus=float(ray.cluster_resources().get("CPU", 0.0)), called_at=called_at, ray_start_s=ray_start_s,
            stored=store.trial_profiles(experiment_id) if existing is not None else None,
        )
        controller = Controller(
            profiler=profiler, trainable_cls=trainable_cls, experiment_id=experiment_id, experiment_name=name,
            run_dir=str(run_dir), store=store, searcher=searcher, scheduler=scheduler, stopper=stopper, metric=metric,
            mode=mode, resources_for=resources_for, max_trials=max_trials, max_concurrent_trials=max_concurrent_trials,
            max_failures=max_failures, checkpoint_freq=ckpt.frequency, checkpoint_at_end=ckpt.at_end,
            time_budget_s=time_budget_s, reporter=reporter, callbacks=callback_list,
            callback_info=_callback_info(
                stop=stop, num_samples=num_samples, max_trials=max_trials, name=name, experiment_id=experiment_id,
                run_dir=run_dir, metric=metric, mode=mode, config=config, resumed=existing is not None,
            ),
            checkpoint_manager=checkpoints, trial_namer=namer, fail_fast=fail_fast,
        )
        if existing is not None:
            _adopt_stored_sweep(controller, checkpoints, load_sweep(
                store, experiment_id, experiment_name=name, trainable_name=trainable_cls.__name__,
                run_dir=str(run_dir), resources_for=resources_for,
                retry_errored=resume in ("ERRORED_ONLY", "RESTART_ERRORED"), restart_errored=resume == "RESTART_ERRORED",
            ))
        store.set_experiment_status(experiment_id, "RUNNING")
        try:
            trials = controller.run()
        finally:
            save_profile(store, experiment_id, profiler.summary(store_write_s=store.write_seconds))
    except BaseException as exc:
        leftovers.discard = _nothing_to_keep(exc, existing, experiment_id, controller)
        raise
    finally:
        try:
            if leftovers.discard:
                leftovers.remove_experiment(store, experiment_id)
            store.close()
        finally:
            lock.release()
            if leftovers.discard:
                leftovers.remove_files()

    analysis = ExperimentAnalysis(run_dir, database_url=database_url, default_metric=metric, default_mode=mode)
    _raise_for_failures(trials, fail_fast=fail_fast, raise_on_failed_trial=raise_on_failed_trial)
    return analysis


def _sweep_spec(
    trainable_cls: type, *, config: Mapping[str, Any], num_samples: int, metric: str | None, mode: str | None,
    scheduler: TrialScheduler, searcher: Searcher, stop: Any, time_budget_s: float | None,
    resources_per_trial: Any, max_concurrent_trials: int | None, max_failures: int, ckpt: Any,
    fail_fast: bool | str, seed: int | None, run_dir: Path, url: str, hparam_domains: Any,
    tensorboard_dir: Path | None,
) -> dict[str, Any]:
    """What the store keeps of the call (``experiments.spec``): plain values, the database URL masked."""
    return {
        "trainable": trainable_cls.__name__,
        "config": repr(dict(config)),
        "num_samples": num_samples,
        "metric": metric,
        "mode": mode,
        "scheduler": type(scheduler).__name__,
        "search_alg": type(searcher).__name__,
        "stop": repr(stop),
        "time_budget_s": time_budget_s,
        "resources_per_trial": repr(resources_per_trial),
        "max_concurrent_trials": max_concurrent_trials,
        "max_failures": max_failures,
        **_checkpoint_spec(ckpt),
        "fail_fast": fail_fast,
        "seed": seed,
        "run_dir": str(run_dir),
        "database_url": mask_url(url),
        "hparam_domains": hparam_domains,
        "tensorboard_dir": str(tensorboard_dir) if tensorboard_dir is not None else None,
    }


def _callback_info(*, stop: Any, num_samples: int, max_trials: int | None, name: str, experiment_id: int,
                   run_dir: Path, metric: str | None, mode: str | None, config: Mapping[str, Any],
                   resumed: bool) -> dict[str, Any]:
    """What callbacks' ``setup`` gets to know of the sweep."""
    return {
        "stop": stop,
        "num_samples": num_samples,
        "total_num_samples": max_trials,
        "experiment_name": name,
        "experiment_id": experiment_id,
        "run_dir": str(run_dir),
        "metric": metric,
        "mode": mode,
        "search_space": dict(config),
        "resumed": resumed,
    }


def _prepare_search(
    scheduler: TrialScheduler | None, search_alg: Searcher | None, *, metric: str | None, mode: str | None,
    config: Mapping[str, Any], num_samples: int, seed: int | None,
) -> tuple[TrialScheduler, Searcher, Searcher, int | None]:
    """(scheduler, searcher, the innermost searcher (under limiters), the trial cap) for the sweep;
    a scheduler or searcher that refuses the sweep's metric, mode or space is a ValueError."""
    scheduler = scheduler or FIFOScheduler()
    if not scheduler.set_search_properties(metric, mode, config=dict(config)):
        raise ValueError(
            f"scheduler: its metric/mode ({scheduler.metric!r}, {scheduler.mode!r}) conflict with "
            f"tune.run's ({metric!r}, {mode!r})"
        )
    searcher = search_alg or BasicVariantGenerator()
    if not searcher.set_search_properties(metric, mode, dict(config), num_samples=num_samples, seed=seed):
        raise ValueError(
            f"search_alg: {type(searcher).__name__} refused tune.run's metric/mode ({metric!r}, {mode!r}) "
            f"or config: its own are ({searcher.metric!r}, {searcher.mode!r}); give the search space "
            f"either to the searcher or to tune.run, not both"
        )
    # The grid generator knows how many trials it has (grid x num_samples); others stop at num_samples.
    innermost = searcher
    while hasattr(innermost, "searcher") and isinstance(innermost.searcher, Searcher):
        innermost = innermost.searcher
    max_trials = None if isinstance(innermost, BasicVariantGenerator) else num_samples
    return scheduler, searcher, innermost, max_trials


def _checkpoint_spec(ckpt: Any) -> dict[str, Any]:
    """The checkpoint settings as the stored experiment spec records them."""
    return {
        "checkpoint_freq": ckpt.frequency,
        "checkpoint_at_end": ckpt.at_end,
        "keep_checkpoints_num": ckpt.num_to_keep,
        "checkpoint_score_attribute": ckpt.score_attribute,
        "checkpoint_score_order": ckpt.score_order,
    }


def _adopt_stored_sweep(controller: Controller, checkpoints: CheckpointManager, sweep: Any) -> None:
    """A resume: the checkpoint records come back (restarted trials lose theirs), then the trials."""
    checkpoints.load()
    for trial_id in sweep.restarted:
        checkpoints.forget(trial_id)
    controller.adopt(sweep)


def _nothing_to_keep(exc: BaseException, existing: dict[str, Any] | None, experiment_id: int | None,
                     controller: Controller | None) -> bool:
    """Whether a sweep this call began failed before it had anything worth keeping: before it
    was in the store, or on a check (a ValueError: resources, trainer config, metric) before
    any trial reported. An interrupted sweep is kept: it is resumable."""
    if existing is not None:
        return False
    if experiment_id is None:
        return True
    if not isinstance(exc, ValueError):
        return False
    return controller is None or not any(t.last_result for t in controller.get_trials())


class _Leftovers:
    """What a new sweep made (its run directory, TensorBoard logdir, experiment row), so that a
    sweep that fails its checks leaves nothing behind."""

    def __init__(self, run_dir: Path, tb_dir: Path | None, *, in_database: bool) -> None:
        self.run_dir = run_dir if _holds_only_locks(run_dir) else None
        self.tb_dir = tb_dir if tb_dir is not None and not tb_dir.exists() else None
        self.in_database = in_database  # the sweep's rows live outside its run directory
        self.discard = False

    def remove_experiment(self, store: Store, experiment_id: int | None) -> None:
        if experiment_id is None or not (self.in_database or self.run_dir is None):
            return  # nothing stored, or stored in a file removed with the run directory
        try:
            store.delete_experiment(experiment_id)
        except Exception:  # noqa: BLE001 - the error that ended the sweep is the one to raise
            logger.warning("could not remove the failed sweep from the store", exc_info=True)

    def remove_files(self) -> None:
        import shutil

        for path in (self.tb_dir, self.run_dir):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


def _holds_only_locks(run_dir: Path) -> bool:
    """Whether ``run_dir`` is new: missing, or holding nothing but the driver's lock files."""
    try:
        return all(entry.name.endswith(".lock") for entry in run_dir.iterdir())
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _existing_sweep(store: Store, name: str, resume: bool | str) -> dict[str, Any] | None:
    """The stored sweep of that name (None if there is none), checked against ``resume``."""
    existing = store.get_experiment(name)
    if existing is not None and not resume:
        raise ValueError(
            f"name: a sweep named {name!r} already exists in {store.url_for_display}; "
            f"pass resume=True to continue it, or pick another name"
        )
    if existing is None and resume not in (False, "AUTO"):
        raise ValueError(f"resume: there is no sweep named {name!r} in {store.url_for_display} to resume")
    return existing


def _raise_for_failures(trials: Sequence[Any], *, fail_fast: bool | str, raise_on_failed_trial: bool) -> None:
    failed = [t for t in trials if t.status == ERROR]
    if failed and isinstance(fail_fast, str):  # fail_fast="raise": the first failure's error
        raise TuneError(f"trial {failed[0].trial_name} failed (fail_fast='raise'):\n{failed[0].error}")
    if failed and raise_on_failed_trial:
        names = ", ".join(t.trial_name for t in failed)
        raise TuneError(f"{len(failed)} trial(s) did not complete: {names}; see analysis.errors or the store")
