"""Ray Tune's configuration objects: ``TuneConfig``, ``RunConfig``, ``CheckpointConfig``, ``FailureConfig``.

Same names, fields and defaults as Ray Tune 2.x, plus this project's own ``RunConfig`` options
(``database_url``, ``tensorboard``, ``tensorboard_dir``). A field that does not exist, or a value a
field cannot take, raises one :class:`ConfigError` naming the field when the object is built;
the rest (search space, scheduler and searcher against metric and mode, ...) is checked by
``tune.run`` when ``Tuner.fit`` starts, still before anything is written.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import re
import time
from typing import Any, Callable, Sequence, TypeVar

from schedulers.trial_scheduler import TrialScheduler, validate_mode
from schedulers.validation import check_int, is_number
from tuner.pack_trials import check_pack_trials
from tuner.stopper import to_stopper
from tuner.storage import check_storage_path


class ConfigError(ValueError, TypeError):
    """A bad configuration field. A ValueError, as every bad argument of ``tune.run`` is, and a
    TypeError, as Python (and Ray Tune) raise for an unknown keyword."""


_Dataclass = TypeVar("_Dataclass", bound=type[Any])


def _strict(cls: _Dataclass) -> _Dataclass:
    """Make ``cls(...)`` (a dataclass) reject unknown fields with one error naming them and the
    allowed ones (a plain dataclass says only "unexpected keyword argument")."""
    init = cls.__init__
    fields = [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ConfigError(
                f"{cls.__name__}: unknown field{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(u) for u in unknown)}; the fields are {fields}"
            )
        if len(args) > len(fields):
            raise ConfigError(f"{cls.__name__} takes at most {len(fields)} positional fields {fields}, got {len(args)}")
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


#: A sweep's name is the name of its run directory inside the storage path: one plain directory
#: name, so that nothing of the sweep lands outside ``<storage_path>/<name>`` ("..", ".", "a/b").
SWEEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
SWEEP_NAME_RULE = "letters, digits, '_', '-' or '.', starting with a letter or digit (a directory name)"


def is_sweep_name(name: Any) -> bool:
    """Whether ``name`` can name a sweep (``tune.run(name=...)``, ``RunConfig.name``, a spec's ``name``)."""
    return isinstance(name, str) and SWEEP_NAME.fullmatch(name) is not None


def default_sweep_name(trainable_name: str) -> str:
    """``<trainable>_<date>_<time>``, with what a sweep name cannot hold replaced (``<lambda>``)."""
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", trainable_name).lstrip("._-") or "sweep"
    return f"{stem}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"


def _check_optional_bool(owner: str, field: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{owner}.{field} must be True, False or None, got {value!r}")


def _check_callable(owner: str, field: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise ConfigError(f"{owner}.{field} must be a function or None, got {type(value).__name__}")


@_strict
@dataclasses.dataclass
class CheckpointConfig:
    """Which checkpoints of each trial are taken and kept (Ray Tune's ``CheckpointConfig``).

    ``num_to_keep``: keep at most this many checkpoints of each trial on disk (None: all), the best
    by ``checkpoint_score_attribute`` in ``checkpoint_score_order`` ("max" or "min"), else the
    newest; the store keeps a record of every checkpoint and of the ones deleted.
    ``checkpoint_frequency``: a class Trainable is checkpointed every this many iterations (0: never);
    ``checkpoint_at_end``: and when it ends. A function trainable checkpoints itself through
    ``tune.report(..., checkpoint=...)``.
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str | None = "max"
    checkpoint_frequency: int | None = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        owner = "CheckpointConfig"
        check_int(self.num_to_keep, f"{owner}.num_to_keep", 1, allow_none=True, error=ConfigError)
        if self.checkpoint_score_attribute is not None and (
            not isinstance(self.checkpoint_score_attribute, str) or not self.checkpoint_score_attribute
        ):
            raise ConfigError(
                f"{owner}.checkpoint_score_attribute must be a metric name (str) or None, "
                f"got {self.checkpoint_score_attribute!r}"
            )
        if self.checkpoint_score_order not in ("max", "min"):
            raise ConfigError(f"{owner}.checkpoint_score_order must be 'max' or 'min', got {self.checkpoint_score_order!r}")
        check_int(self.checkpoint_frequency, f"{owner}.checkpoint_frequency", 0, allow_none=True, error=ConfigError)
        _check_optional_bool(owner, "checkpoint_at_end", self.checkpoint_at_end)


@_strict
@dataclasses.dataclass
class FailureConfig:
    """What happens when a trial fails (Ray Tune's ``FailureConfig``).

    ``max_failures``: retry a failed trial up to this many times from its last checkpoint (-1:
    forever). ``fail_fast``: stop the whole sweep at the first trial that fails for good ("raise":
    and raise its error from ``fit``); it needs ``max_failures=0``, as in Ray Tune.
    """

    max_failures: int = 0
    fail_fast: bool | str = False

    def __post_init__(self) -> None:
        check_int(self.max_failures, "FailureConfig.max_failures", -1, error=ConfigError)
        check_fail_fast(self.fail_fast, self.max_failures, owner="FailureConfig.")


def check_fail_fast(fail_fast: Any, max_failures: Any, owner: str = "") -> None:
    """Raise one ConfigError naming ``fail_fast`` unless it is a bool or "raise" (and max_failures is 0 with it)."""
    if not isinstance(fail_fast, bool) and not (isinstance(fail_fast, str) and fail_fast.upper() == "RAISE"):
        raise ConfigError(f"{owner}fail_fast must be True, False or 'raise', got {fail_fast!r}")
    if fail_fast and max_failures != 0:
        raise ConfigError(f"{owner}fail_fast={fail_fast!r} needs max_failures=0 (a failed trial ends the sweep), "
                          f"got max_failures={max_failures!r}")


@_strict
@dataclasses.dataclass
class TuneConfig:
    """How the search runs (Ray Tune's ``TuneConfig``; see ``tune.run`` for each field).

    ``metric``/``mode`` are also what ``ResultGrid.get_best_result()`` uses by default.
    ``reuse_actors`` is accepted for compatibility: trial actors are always reused between trials
    of the same resources here, with a fresh trainable built for each trial. ``pack_trials``:
    trials of one shape as members of one population learner (``tune.run``'s).
    """

    mode: str | None = None
    metric: str | None = None
    search_alg: Any = None
    scheduler: TrialScheduler | None = None
    num_samples: int = 1
    max_concurrent_trials: int | None = None
    time_budget_s: float | datetime.timedelta | None = None
    reuse_actors: bool = False
    pack_trials: bool | int | str = "auto"
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        owner = "TuneConfig"
        try:
            validate_mode(self.mode, f"{owner}.mode")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.metric is not None and not isinstance(self.metric, str):
            raise ConfigError(f"{owner}.metric must be a string or None, got {self.metric!r}")
        check_int(self.num_samples, f"{owner}.num_samples", 1, error=ConfigError)
        if self.max_concurrent_trials == 0:  # Ray Tune: 0 means no limit
            self.max_concurrent_trials = None
        check_int(self.max_concurrent_trials, f"{owner}.max_concurrent_trials", 1, allow_none=True, error=ConfigError)
        if isinstance(self.time_budget_s, datetime.timedelta):
            self.time_budget_s = self.time_budget_s.total_seconds()
        if self.time_budget_s is not None and (
            not is_number(self.time_budget_s, numpy=False) or self.time_budget_s <= 0
        ):
            raise ConfigError(f"{owner}.time_budget_s must be a number of seconds > 0 or None, got {self.time_budget_s!r}")
        if not isinstance(self.reuse_actors, bool):
            raise ConfigError(f"{owner}.reuse_actors must be True or False, got {self.reuse_actors!r}")
        try:
            check_pack_trials(self.pack_trials)
        except ValueError as exc:
            raise ConfigError(f"{owner}.{exc}") from None
        if self.scheduler is not None and not isinstance(self.scheduler, TrialScheduler):
            raise ConfigError(f"{owner}.scheduler must be a TrialScheduler, got {type(self.scheduler).__name__}")
        _check_callable(owner, "trial_name_creator", self.trial_name_creator)
        _check_callable(owner, "trial_dirname_creator", self.trial_dirname_creator)


@_strict
@dataclasses.dataclass
class RunConfig:
    """Where and how a sweep runs (Ray Tune's ``RunConfig``) and this project's own options:
    ``database_url`` (any SQLAlchemy URL; default a SQLite file in the run directory),
    ``tensorboard`` and ``tensorboard_dir`` (the live HParams export; see ``tune.run``).

    ``verbose`` 0 (silent) to 3 (every result); None means 1.
    """

    name: str | None = None
    storage_path: str | os.PathLike[str] | None = None
    storage_filesystem: Any = dataclasses.field(default=None, repr=False)  # a pyarrow.fs or fsspec filesystem
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    verbose: int | None = None
    stop: Any = None
    callbacks: Sequence[Any] | None = None
    database_url: str | None = dataclasses.field(default=None, repr=False)  # it may hold a password
    tensorboard: bool = True
    tensorboard_dir: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        owner = "RunConfig"
        self.failure_config = self.failure_config or FailureConfig()
        self.checkpoint_config = self.checkpoint_config or CheckpointConfig()
        if not isinstance(self.failure_config, FailureConfig):
            raise ConfigError(f"{owner}.failure_config must be a tune.FailureConfig, got {type(self.failure_config).__name__}")
        if not isinstance(self.checkpoint_config, CheckpointConfig):
            raise ConfigError(
                f"{owner}.checkpoint_config must be a tune.CheckpointConfig, got {type(self.checkpoint_config).__name__}"
            )
        if self.name is not None and not is_sweep_name(self.name):
            raise ConfigError(f"{owner}.name must be {SWEEP_NAME_RULE}, got {self.name!r}")
        if self.storage_path is not None and not isinstance(self.storage_path, (str, os.PathLike)):
            raise ConfigError(f"{owner}.storage_path must be a path or None, got {self.storage_path!r}")
        try:
            check_storage_path(self.storage_path, f"{owner}.storage_path", self.storage_filesystem)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            to_stopper(self.stop)  # what tune.run would refuse, refused here
        except ValueError as exc:
            raise ConfigError(f"{owner}.{exc}") from None
        if self.verbose is not None and (isinstance(self.verbose, bool) or self.verbose not in (0, 1, 2, 3)):
            raise ConfigError(f"{owner}.verbose must be one of [0, 1, 2, 3] or None, got {self.verbose!r}")
        if self.callbacks is not None:
            from tuner.callback import Callback

            if isinstance(self.callbacks, (str, bytes)) or not isinstance(self.callbacks, Sequence):
                raise ConfigError(f"{owner}.callbacks must be a list of tune.Callback, got {type(self.callbacks).__name__}")
            for cb in self.callbacks:
                if not isinstance(cb, Callback):
                    raise ConfigError(f"{owner}.callbacks: each callback must be a tune.Callback, got {type(cb).__name__}")
        if self.database_url is not None and not isinstance(self.database_url, str):
            raise ConfigError(f"{owner}.database_url must be a SQLAlchemy URL string or None")
        if not isinstance(self.tensorboard, bool):
            raise ConfigError(f"{owner}.tensorboard must be True or False, got {self.tensorboard!r}")


@dataclasses.dataclass(frozen=True)
class CheckpointSettings:
    """What the engine needs of checkpointing, from a CheckpointConfig and tune.run's own arguments."""

    num_to_keep: int | None
    score_attribute: str | None
    score_order: str
    frequency: Any
    at_end: Any


def checkpoint_settings(
    checkpoint_config: Any, *, keep_checkpoints_num: Any = None, checkpoint_score_attr: Any = None,
    checkpoint_freq: Any = 0, checkpoint_at_end: Any = False,
) -> CheckpointSettings:
    """Merge ``tune.run``'s ``checkpoint_config`` with its older arguments (as Ray Tune does: an
    older argument that is set wins; ``checkpoint_score_attr="min-loss"`` means loss, "min")."""
    if checkpoint_config is None:
        checkpoint_config = CheckpointConfig()
    if not isinstance(checkpoint_config, CheckpointConfig):
        raise ConfigError(f"checkpoint_config must be a tune.CheckpointConfig, got {type(checkpoint_config).__name__}")
    num_to_keep = checkpoint_config.num_to_keep
    if keep_checkpoints_num is not None:
        check_int(keep_checkpoints_num, "tune.run.keep_checkpoints_num", 1, error=ConfigError)
        num_to_keep = keep_checkpoints_num
    attribute, order = checkpoint_config.checkpoint_score_attribute, checkpoint_config.checkpoint_score_order
    if checkpoint_score_attr is not None:
        if not isinstance(checkpoint_score_attr, str) or checkpoint_score_attr in ("", "min-"):
            raise ConfigError(f"checkpoint_score_attr must be a metric name, got {checkpoint_score_attr!r}")
        attribute, order = checkpoint_score_attr, "max"
        if attribute.startswith("min-"):
            attribute, order = attribute[4:], "min"
    # Not coerced: tune.run's own checks name checkpoint_freq / checkpoint_at_end if they are bad.
    frequency = checkpoint_freq or checkpoint_config.checkpoint_frequency or 0
    at_end = checkpoint_at_end if checkpoint_at_end else bool(checkpoint_config.checkpoint_at_end)
    return CheckpointSettings(num_to_keep, attribute, order or "max", frequency, at_end)


__all__ = [
    "CheckpointConfig",
    "CheckpointSettings",
    "ConfigError",
    "FailureConfig",
    "RunConfig",
    "TuneConfig",
    "SWEEP_NAME_RULE",
    "check_fail_fast",
    "checkpoint_settings",
    "default_sweep_name",
    "is_sweep_name",
]
