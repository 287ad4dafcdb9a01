"""``tune.run``: validate the experiment once, then hand it to the controller."""

from __future__ import annotations

import inspect
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import ray

from schedulers.trial_scheduler import TrialScheduler
from schedulers.trial_status import TrialStatus
from tuner.analysis import ExperimentAnalysis
from tuner.callback import Callback, CallbackList
from tuner.errors import TuneError
from tuner.execution import heartbeat, signals
from tuner.execution.checkpoint_manager import CheckpointManager
from tuner.execution.controller import Controller
from tuner.execution.leftovers import Leftovers, nothing_to_keep
from tuner.execution.profiler import SweepProfiler, save_profile
from tuner.execution.pack_plan import PackPlan
from tuner.execution.progress import ProgressReporter
from tuner.execution.resources import PlacementGroupFactory, to_placement_group_factory
from tuner.execution.resume import adopt_stored_sweep, load_sweep, validate_resume
from tuner.execution.sweep_lock import SweepLock
from tuner.execution.trial_naming import TrialNamer
from tuner.search.setup import grid_total, prepare_search
from tuner.ray_session import check_ray_address, ensure_ray
from tuner.registry import get_trainable
from tuner.relocation import adopt_run_dir
from tuner.run_arguments import check_writable_dir, validate_arguments
from tuner.run_options import RunOptions
from tuner.search.searcher import Searcher
from tuner.sendable import check_config_values, check_trainable_sendable
from tuner.storage import Storage, open_storage
from tuner.stopper import Stopper, to_stopper
from tuner.store import Store, default_database_url, mask_url
from tuner.sweep_status import SweepStatus
from tuner.tensorboard.domains import describe_search_space
from tuner.trainable.function_trainable import wrap_function
from tuner.trainable.trainable import Trainable
from tuner.tune_config import (
    CheckpointConfig,
    CheckpointSettings,
    check_fail_fast,
    checkpoint_settings,
    default_sweep_name,
)

DEFAULT_STORAGE_PATH = "~/tuner_results"
#: Set by `tuner submit` in its Ray Job's environment: the job's id and the Jobs API it went to.
JOB_ID_ENV = "TUNER_JOB_ID"
JOB_ADDRESS_ENV = "TUNER_JOB_ADDRESS"

logger = logging.getLogger(__name__)


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


def _check_can_run(options: RunOptions) -> Storage:
    """Raise one clear error, before anything is written, when the sweep could not be stored where
    it is asked to (``storage_path``, ``tensorboard_dir``) or the Ray it is to join does not answer;
    the sweep's storage (an object store is asked whether it answers, nothing is written there)."""
    storage_path, name, tensorboard_dir = options.storage_path, options.name, options.tensorboard_dir
    if storage_path is not None and (not isinstance(storage_path, (str, os.PathLike)) or not os.fspath(storage_path)):
        raise ValueError(f"storage_path must be a path (str or os.PathLike) or None, got {storage_path!r}")
    if options.storage_filesystem is not None and storage_path is None:
        raise ValueError("storage_filesystem: give storage_path too (the folder in that filesystem)")
    storage = open_storage(storage_path or DEFAULT_STORAGE_PATH, options.storage_filesystem)
    storage.check()
    root = local_root(storage)
    check_writable_dir(root, "storage_path")
    if isinstance(name, str):
        run_dir = root / name
        if run_dir.exists() and not run_dir.is_dir():
            raise ValueError(f"name: {run_dir} (the sweep's run directory) is a file; pick another name")
        if run_dir.is_dir():  # a resumed sweep writes into its own directory
            check_writable_dir(run_dir, "storage_path")
    if options.tensorboard and tensorboard_dir is not None:
        check_writable_dir(Path(tensorboard_dir).expanduser().absolute(), "tensorboard_dir")
    check_ray_address()
    return storage


def local_root(storage: Storage) -> Path:
    """The folder of this machine that holds a sweep's run directory (its SQLite store, its
    TensorBoard logs, its spec): the storage folder itself, or, for object storage (where the
    checkpoints go), ``$TUNER_STORAGE_PATH`` or ``~/tuner_results``."""
    if storage.is_local:
        return Path(storage.root)
    return Path(os.environ.get("TUNER_STORAGE_PATH") or DEFAULT_STORAGE_PATH).expanduser().absolute()


def _hparam_domains(config: Mapping[str, Any], searcher: Searcher) -> list[dict[str, Any]]:
    """The hparams and domains the TensorBoard export shows (stored in the spec for a rebuild):
    tune.run's search space, or the searcher's own when it was given one."""
    space: Any = config
    if not config:  # OptunaSearch(space={...}): its space, "a/b" keys expanded into nested dicts
        space = searcher.own_space() or {}
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
        with signals.graceful_sigterm(), signals.graceful_sigint():
            analysis = fn(*args, **kwargs)
            signals.raise_if_terminated()
        return analysis

    return wrapper


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
    cpu_share: float | None = None,
    max_failures: int = 0,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    storage_path: str | os.PathLike[str] | None = None,
    storage_filesystem: Any = None,
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
    pack_trials: bool | int | str = "auto",
    trial_name_creator: Callable[[Any], str] | None = None,
    trial_dirname_creator: Callable[[Any], str] | None = None,
    _tuner_state: bytes | None = None,
) -> ExperimentAnalysis:
    """Run a sweep of ``run_or_experiment`` over ``config`` and return its analysis.

    Trials run concurrently as Ray actors, one placement group each; every result is stored in
    SQL (a SQLite file in ``storage_path/name`` unless ``database_url`` names another database).
    ``storage_path`` is a folder (local, NFS) or an object store's URI (``s3://bucket/prefix``,
    ``gs://...``; ``storage_filesystem``: any pyarrow or fsspec filesystem it is a folder of): each
    trial's node writes its checkpoints straight there and any node reads them back; the sweep's
    SQLite store and TensorBoard logs then stay on this machine, in ``$TUNER_STORAGE_PATH`` or
    ``~/tuner_results``.
    ``resume=True`` continues the stored sweep of that name (finished trials are kept, interrupted
    ones restart from their last checkpoint, the searcher and scheduler go on from their stored
    state); ``"ERRORED_ONLY"`` also retries the trials that failed (from their last checkpoint),
    ``"RESTART_ERRORED"`` from scratch; ``"AUTO"`` resumes if the sweep exists and starts it otherwise.
    ``time_budget_s`` stops the running trials once spent (counted from the start of this call, so a
    resume gets it afresh); trials that never ran leave the sweep INCOMPLETE, which a resume finishes.

    ``cpu_share`` (a number in (0, 1]) caps the CPUs this sweep's trials hold at once at that share of
    the cluster's, so that sweeps sharing a cluster all progress (its first trial always runs);
    ``tuner submit`` gives submitted sweeps 0.5 unless their spec says otherwise.

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

    ``pack_trials`` runs trials whose configs share a shape (a trainer that can pack them: PPO
    on a flat Box and Discrete actions, say) as members of one population learner in one process,
    each member still a trial of its own (its results, checkpoints, scheduler decisions):
    ``"auto"`` packs where the trainer can and the planned trials outnumber the learners the
    cluster runs side by side; an int is the most members per pack; False never packs. The sweep
    says once how it packed and why.

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
    return run_sweep(run_or_experiment, RunOptions.from_arguments(locals()), tuner_state=_tuner_state)


@_sigterm_as_interrupt
def run_sweep(run_or_experiment: Any, options: RunOptions, *, tuner_state: bytes | None = None) -> ExperimentAnalysis:
    """:func:`run` with its keyword arguments in one :class:`~tuner.run_options.RunOptions` (what
    ``tune.Tuner`` and ``tuner sweep`` build); ``tuner_state`` is what ``Tuner.restore`` rebuilds from."""
    called_at = time.monotonic()  # the sweep's profile counts engine start from here
    sweep = _resolve_sweep(run_or_experiment, options)
    lock, leftovers, store = _open_sweep(sweep)
    started = _Started()
    try:
        trials = _run_sweep(sweep, store, started, lock, called_at=called_at, tuner_state=tuner_state)
    except BaseException as exc:
        leftovers.discard = nothing_to_keep(exc, started.existing, started.experiment_id, started.controller)
        raise
    finally:
        _close_sweep(store, lock, leftovers, started.experiment_id)

    options = sweep.options
    analysis = ExperimentAnalysis(sweep.run_dir, database_url=options.database_url, default_metric=options.metric,
                                  default_mode=options.mode)
    _raise_for_failures(trials, fail_fast=options.fail_fast, raise_on_failed_trial=options.raise_on_failed_trial)
    return analysis


@dataclass(frozen=True)
class _Sweep:
    """tune.run's options, checked, and the parts of the sweep made from them before anything is written."""

    #: As given, but for what the checks fill in: ``config`` ({} for None), ``name`` (the default
    #: name for None), ``resume`` (checked), ``checkpoint_freq`` and ``checkpoint_at_end`` (merged
    #: with ``checkpoint_config``).
    options: RunOptions
    trainable_cls: type[Trainable]
    scheduler: TrialScheduler
    searcher: Searcher
    max_trials: int | None
    planned_trials: int | None  # how many trials the sweep will run (None: its searcher decides)
    stopper: Stopper
    resources_for: Callable[[dict[str, Any]], PlacementGroupFactory]
    ckpt: CheckpointSettings
    namer: TrialNamer
    callbacks: CallbackList
    reporter: ProgressReporter
    run_dir: Path
    tb_dir: Path | None  # None: no TensorBoard export
    url: str
    hparam_domains: list[dict[str, Any]]
    storage: Storage  # where the checkpoints go: the folder holding run_dir, or an object store
    trainable_ref: str | None  # how another process finds the trainable again (None: it cannot)

    @property
    def name(self) -> str:
        assert self.options.name is not None  # filled in by _resolve_sweep
        return self.options.name

    @property
    def config(self) -> Mapping[str, Any]:
        assert self.options.config is not None  # filled in by _resolve_sweep
        return self.options.config


def _resolve_sweep(run_or_experiment: Any, options: RunOptions) -> _Sweep:
    """Check tune.run's arguments (one ValueError naming the first bad one) and resolve them into
    the sweep's parts: trainable, scheduler and searcher, paths, store URL. Nothing is written."""
    trainable_cls = resolve_trainable(run_or_experiment)
    ckpt = checkpoint_settings(
        options.checkpoint_config, keep_checkpoints_num=options.keep_checkpoints_num,
        checkpoint_score_attr=options.checkpoint_score_attr, checkpoint_freq=options.checkpoint_freq,
        checkpoint_at_end=options.checkpoint_at_end,
    )
    config = {} if options.config is None else options.config
    options = replace(options, config=config, checkpoint_freq=ckpt.frequency, checkpoint_at_end=ckpt.at_end)
    validate_arguments(trainable_cls, options)
    check_config_values(config)
    check_trainable_sendable(trainable_cls, run_or_experiment)
    storage = _check_can_run(options)
    check_fail_fast(options.fail_fast, options.max_failures)
    if options.reuse_actors is not None and not isinstance(options.reuse_actors, bool):
        raise ValueError(f"reuse_actors must be True, False or None, got {options.reuse_actors!r}")
    namer = TrialNamer(options.trial_name_creator, options.trial_dirname_creator)
    resume = validate_resume(options.resume)
    callback_list = CallbackList(options.callbacks)
    stopper = to_stopper(options.stop)
    resources_for = _resources_for(trainable_cls, options.resources_per_trial)
    reporter = ProgressReporter(verbose=options.verbose, metric=options.metric, mode=options.mode)
    scheduler, searcher, innermost, max_trials = prepare_search(options)
    planned = max_trials if max_trials is not None else grid_total(innermost)
    if trainable_cls.packed_trainable() is not None:  # its line goes to the progress output and every display
        resources_for = PackPlan(trainable_cls, options.pack_trials, planned, resources_for,
                                 cluster=ray.cluster_resources, say=lambda line: callback_list.call("on_note", line),
                                 space={**config, **(innermost.own_space() or {})},
                                 define_by_run=innermost.defines_space_by_run())
    name = options.name or default_sweep_name(trainable_cls.__name__)
    run_dir = local_root(storage) / name
    tb_dir = (Path(options.tensorboard_dir).expanduser().absolute() if options.tensorboard_dir is not None
              else run_dir / "tensorboard")
    hparam_domains = _hparam_domains(config, innermost)
    url = options.database_url or default_database_url(run_dir)
    if resume not in (False, "AUTO") and options.database_url is None and not (run_dir / "tuner.db").exists():
        raise ValueError(f"resume: there is no sweep named {name!r} under {run_dir.parent} to resume")
    return _Sweep(
        options=replace(options, name=name, resume=resume), trainable_cls=trainable_cls, scheduler=scheduler,
        searcher=searcher, max_trials=max_trials, planned_trials=planned, stopper=stopper, resources_for=resources_for, ckpt=ckpt,
        trainable_ref=_trainable_ref(run_or_experiment),
        namer=namer, callbacks=callback_list, reporter=reporter, run_dir=run_dir,
        tb_dir=tb_dir if options.tensorboard else None, url=url, hparam_domains=hparam_domains, storage=storage,
    )


def _open_sweep(sweep: _Sweep) -> tuple[SweepLock, Leftovers, Store]:
    """Hold the sweep (its lock), note what is there before this call, and open its store; a store
    that cannot be opened frees the lock and removes what this call made."""
    # One driver per sweep, held where the sweep is stored: taken before the sweep is looked up or
    # anything is written, so two drivers racing on one sweep cannot both run it.
    lock = SweepLock(sweep.url, sweep.name, sweep.run_dir).acquire()
    # Looked at once this driver holds the sweep: what is there now is not this call's to remove.
    leftovers = Leftovers(sweep.run_dir, sweep.tb_dir, in_database=sweep.options.database_url is not None)
    try:
        store = Store(sweep.url)
    except BaseException:
        lock.release()
        leftovers.remove_files()
        raise
    return lock, leftovers, store


@dataclass
class _Started:
    """How far a sweep got, which is what decides whether a failure leaves anything behind."""

    existing: dict[str, Any] | None = None  # the stored sweep this call resumes
    experiment_id: int | None = None
    controller: Controller | None = None


def _run_sweep(
    sweep: _Sweep, store: Store, started: _Started, lock: SweepLock, *, called_at: float, tuner_state: bytes | None,
) -> list[Any]:
    """Start Ray, record the sweep in the store, build its controller (adopting the stored trials on
    a resume) and run it; ``started`` follows along for the cleanup of a failure."""
    if sweep.options.resume and sweep.options.database_url is None:  # a run directory moved or copied with its store
        adopt_run_dir(store, sweep.run_dir, sweep.name)
    started.existing = existing = _existing_sweep(store, sweep.name, sweep.options.resume)
    ray_began = time.monotonic()
    ensure_ray()
    signals.rearm()  # ray.init installs its own SIGTERM handler
    ray_start_s = time.monotonic() - ray_began
    started.experiment_id = experiment_id = _record_experiment(sweep, store, existing, tuner_state)
    checkpoints = CheckpointManager(
        store, experiment_id, str(sweep.run_dir), num_to_keep=sweep.ckpt.num_to_keep,
        score_attribute=sweep.ckpt.score_attribute, score_order=sweep.ckpt.score_order, storage=sweep.storage,
    )
    profiler = SweepProfiler(
        total_cpus=float(ray.cluster_resources().get("CPU", 0.0)), called_at=called_at, ray_start_s=ray_start_s,
        stored=store.trial_profiles(experiment_id) if existing is not None else None,
    )
    started.controller = controller = _build_controller(
        sweep, store, experiment_id, profiler, checkpoints, resumed=existing is not None)
    if existing is not None:
        adopt_stored_sweep(controller, checkpoints, load_sweep(
            store, experiment_id, experiment_name=sweep.name, trainable_name=sweep.trainable_cls.__name__,
            run_dir=str(sweep.run_dir), resources_for=sweep.resources_for,
            retry_errored=sweep.options.resume in ("ERRORED_ONLY", "RESTART_ERRORED"),
            restart_errored=sweep.options.resume == "RESTART_ERRORED",
        ), store)
    store.set_experiment_status(experiment_id, SweepStatus.RUNNING)
    with heartbeat.Heartbeat(store, experiment_id, lock):
        return _run_controller(controller, store, experiment_id, profiler)


def _run_controller(controller: Controller, store: Store, experiment_id: int, profiler: SweepProfiler) -> list[Any]:
    try:
        trials = controller.run()
    except BaseException:
        try:
            save_profile(store, experiment_id, profiler.summary(store_write_s=store.write_seconds))
        except Exception:  # noqa: BLE001 - never raised over the exception that ended the sweep (a failed store)
            logger.debug("could not save the sweep's profile", exc_info=True)
        raise
    save_profile(store, experiment_id, profiler.summary(store_write_s=store.write_seconds))
    return trials


def _record_experiment(
    sweep: _Sweep, store: Store, existing: dict[str, Any] | None, tuner_state: bytes | None,
) -> int:
    """The sweep's experiment row (made, or the stored one of a resume) with its spec; the live
    TensorBoard export is added to the callbacks first (its logs rebuilt if a resume lost them)."""
    spec = _sweep_spec(sweep)
    if sweep.tb_dir is not None:
        from tuner.tensorboard.exporter import TensorBoardExporter

        if existing is not None and not sweep.tb_dir.exists():  # resumed without its logs: rebuild them first
            _rebuild_tensorboard(sweep.run_dir, sweep.url, sweep.tb_dir)
        sweep.callbacks.add(TensorBoardExporter(sweep.tb_dir, hparam_domains=sweep.hparam_domains))
    experiment_id = store.get_or_create_experiment(sweep.name, spec=spec, metric=sweep.options.metric, mode=sweep.options.mode)
    # Who runs it now, and as which Ray Job (`tuner submit` sets these for the job's driver); the
    # spec replaces the one `tuner submit` recorded before this driver started.
    store.update_experiment(experiment_id, owner=heartbeat.owner(), job_id=os.environ.get(JOB_ID_ENV),
                            job_address=os.environ.get(JOB_ADDRESS_ENV),
                            **({"spec": spec} if existing is None or (existing.get("spec") or {}).get("submitted") else {}))
    if tuner_state is not None:  # what Tuner.restore rebuilds the Tuner from
        store.save_state(experiment_id, "tuner", tuner_state)
    return experiment_id


def _build_controller(
    sweep: _Sweep, store: Store, experiment_id: int, profiler: SweepProfiler, checkpoints: CheckpointManager,
    *, resumed: bool,
) -> Controller:
    return Controller(
        profiler=profiler, trainable_cls=sweep.trainable_cls, experiment_id=experiment_id,
        experiment_name=sweep.name, run_dir=str(sweep.run_dir), store=store, searcher=sweep.searcher,
        scheduler=sweep.scheduler, stopper=sweep.stopper, resources_for=sweep.resources_for, options=sweep.options,
        max_trials=sweep.max_trials, reporter=sweep.reporter, callbacks=sweep.callbacks,
        callback_info=_callback_info(sweep, experiment_id, resumed=resumed),
        checkpoint_manager=checkpoints, trial_namer=sweep.namer, storage=sweep.storage,
    )


def _close_sweep(store: Store, lock: SweepLock, leftovers: Leftovers, experiment_id: int | None) -> None:
    """Close the store and free the sweep; a new sweep that failed with nothing to keep is removed,
    its rows before the store closes, its files once the lock is released."""
    try:
        if leftovers.discard:
            leftovers.remove_experiment(store, experiment_id)
        store.close()
    finally:
        lock.release()
        if leftovers.discard:
            leftovers.remove_files()


def _trainable_ref(trainable: Any) -> str | None:
    """The name the trainable was given by (a registered name, ``module:attribute``), or the
    ``module:qualname`` of an importable function or class; None for one a script defines."""
    if isinstance(trainable, str):
        return trainable
    module, qualname = getattr(trainable, "__module__", None), getattr(trainable, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname or "." in qualname:
        return None
    return f"{module}:{qualname}"


def _sweep_spec(sweep: _Sweep) -> dict[str, Any]:
    """What the store keeps of the call (``experiments.spec``): plain values, the database URL masked."""
    return {
        "trainable": sweep.trainable_cls.__name__,
        "trainable_ref": sweep.trainable_ref,
        "config": repr(dict(sweep.config)),
        "num_samples": sweep.options.num_samples,
        "planned_trials": sweep.planned_trials,
        "metric": sweep.options.metric,
        "mode": sweep.options.mode,
        "scheduler": type(sweep.scheduler).__name__,
        "search_alg": type(sweep.searcher).__name__,
        "stop": repr(sweep.options.stop),
        "time_budget_s": sweep.options.time_budget_s,
        "resources_per_trial": repr(sweep.options.resources_per_trial),
        "max_concurrent_trials": sweep.options.max_concurrent_trials,
        "cpu_share": sweep.options.cpu_share,
        "max_failures": sweep.options.max_failures,
        **_checkpoint_spec(sweep.ckpt),
        "fail_fast": sweep.options.fail_fast,
        "seed": sweep.options.seed,
        "run_dir": str(sweep.run_dir),
        "storage": sweep.storage.root,
        "database_url": mask_url(sweep.url),
        "hparam_domains": sweep.hparam_domains,
        "tensorboard_dir": str(sweep.tb_dir) if sweep.tb_dir is not None else None,
    }


def _callback_info(sweep: _Sweep, experiment_id: int, *, resumed: bool) -> dict[str, Any]:
    """What callbacks' ``setup`` gets to know of the sweep."""
    return {
        "stop": sweep.options.stop,
        "num_samples": sweep.options.num_samples,
        "total_num_samples": sweep.max_trials,
        "experiment_name": sweep.name,
        "experiment_id": experiment_id,
        "run_dir": str(sweep.run_dir),
        "metric": sweep.options.metric,
        "mode": sweep.options.mode,
        "search_space": dict(sweep.config),
        "resumed": resumed,
    }


def _checkpoint_spec(ckpt: Any) -> dict[str, Any]:
    """The checkpoint settings as the stored experiment spec records them."""
    return {
        "checkpoint_freq": ckpt.frequency,
        "checkpoint_at_end": ckpt.at_end,
        "keep_checkpoints_num": ckpt.num_to_keep,
        "checkpoint_score_attribute": ckpt.score_attribute,
        "checkpoint_score_order": ckpt.score_order,
    }


def _existing_sweep(store: Store, name: str, resume: bool | str) -> dict[str, Any] | None:
    """The stored sweep of that name (None if there is none), checked against ``resume``."""
    existing = store.get_experiment(name)
    if existing is not None and submitted_as_this_job(existing):  # recorded by `tuner submit`: this is its start
        return None
    if existing is not None and not resume:
        raise ValueError(
            f"name: a sweep named {name!r} already exists in {store.url_for_display}; "
            f"pass resume=True to continue it, or pick another name"
        )
    if existing is None and resume not in (False, "AUTO"):
        raise ValueError(f"resume: there is no sweep named {name!r} in {store.url_for_display} to resume")
    return existing


def submitted_as_this_job(experiment: Mapping[str, Any]) -> bool:
    """Whether ``experiment`` is the record `tuner submit` made of a new sweep for the Ray Job this
    driver runs as (not run yet: it holds the submitter's placeholder spec)."""
    job_id = os.environ.get(JOB_ID_ENV)
    return bool(job_id) and experiment.get("status") == SweepStatus.SUBMITTED and \
        experiment.get("job_id") == job_id and bool((experiment.get("spec") or {}).get("submitted"))


def _raise_for_failures(trials: Sequence[Any], *, fail_fast: bool | str, raise_on_failed_trial: bool) -> None:
    failed = [t for t in trials if t.status == TrialStatus.ERROR]
    if failed and isinstance(fail_fast, str):  # fail_fast="raise": the first failure's error
        raise TuneError(f"trial {failed[0].trial_name} failed (fail_fast='raise'):\n{failed[0].error}")
    if failed and raise_on_failed_trial:
        names = ", ".join(t.trial_name for t in failed)
        raise TuneError(f"{len(failed)} trial(s) did not complete: {names}; see analysis.errors or the store")
