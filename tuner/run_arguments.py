"""The checks of ``tune.run``'s arguments, all made before anything is written: one ValueError
naming the first bad argument."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Mapping

from schedulers.trial_scheduler import TrialScheduler, validate_mode
from schedulers.validation import check_int, is_int, is_number
from tuner.pack_trials import check_pack_trials
from tuner.run_options import RunOptions
from tuner.search.basic_variant import BasicVariantGenerator
from tuner.search.searcher import Searcher
from tuner.trainable.function_trainable import FunctionTrainable
from tuner.trainable.trainable import Trainable
from tuner.tune_config import SWEEP_NAME_RULE, is_sweep_name

__all__ = ["check_writable_dir", "validate_arguments"]


def validate_arguments(trainable_cls: type[Trainable], options: RunOptions) -> None:
    """Raise one ValueError naming the first bad argument of tune.run; nothing is written before.
    ``options.checkpoint_freq`` and ``checkpoint_at_end`` are the ones merged with ``checkpoint_config``."""
    o = options
    if not isinstance(o.config, Mapping):
        raise ValueError(f"config must be a dict (the search space), got {type(o.config).__name__}")
    # 0 only where a searcher's points_to_evaluate are the trials (BasicVariantGenerator checks that)
    check_int(o.num_samples, "num_samples", 0 if isinstance(o.search_alg, BasicVariantGenerator) else 1)
    validate_mode(o.mode)
    if o.metric is not None and not isinstance(o.metric, str):
        raise ValueError(f"metric must be a string, got {o.metric!r}")
    if (o.metric is None) != (o.mode is None):
        raise ValueError(f"metric and mode go together: got metric={o.metric!r}, mode={o.mode!r}")
    if o.scheduler is not None and not isinstance(o.scheduler, TrialScheduler):
        raise ValueError(f"scheduler must be a TrialScheduler, got {type(o.scheduler).__name__}")
    if o.search_alg is not None and not isinstance(o.search_alg, Searcher):
        raise ValueError(f"search_alg must be a Searcher, got {type(o.search_alg).__name__}")
    if o.time_budget_s is not None and (not is_number(o.time_budget_s, numpy=False) or o.time_budget_s <= 0):
        raise ValueError(f"time_budget_s must be a number of seconds > 0 or None, got {o.time_budget_s!r}")
    check_int(o.max_concurrent_trials, "max_concurrent_trials", 1, allow_none=True)
    if o.cpu_share is not None and (not is_number(o.cpu_share, numpy=False) or not 0 < o.cpu_share <= 1):
        raise ValueError(f"cpu_share must be a number in (0, 1] (the share of the cluster's CPUs the sweep may "
                         f"hold) or None, got {o.cpu_share!r}")
    check_int(o.max_failures, "max_failures", -1)
    check_pack_trials(o.pack_trials)
    if o.pack_trials not in ("auto", False, 1) and trainable_cls.packed_trainable() is None:
        raise ValueError(f"pack_trials={o.pack_trials!r}: {trainable_cls.__name__} does not pack trials "
                         f"(use 'auto' or False)")
    check_int(o.checkpoint_freq, "checkpoint_freq", 0)
    if o.checkpoint_freq and issubclass(trainable_cls, FunctionTrainable):
        raise ValueError(
            "checkpoint_freq: a function trainable checkpoints itself through "
            "tune.report(..., checkpoint=...); checkpoint_freq is for Trainable classes"
        )
    if not isinstance(o.checkpoint_at_end, bool):
        raise ValueError(f"checkpoint_at_end must be True or False, got {o.checkpoint_at_end!r}")
    if o.name is not None and not is_sweep_name(o.name):
        raise ValueError(f"name must be {SWEEP_NAME_RULE}, got {o.name!r}")
    if o.seed is not None and not is_int(o.seed, numpy=False):
        raise ValueError(f"seed must be an int or None, got {o.seed!r}")
    if not isinstance(o.tensorboard, bool):
        raise ValueError(f"tensorboard must be True or False, got {o.tensorboard!r}")
    if o.tensorboard_dir is not None and (
        not isinstance(o.tensorboard_dir, (str, os.PathLike)) or not os.fspath(o.tensorboard_dir)
    ):
        raise ValueError(f"tensorboard_dir must be a path (str or os.PathLike) or None, got {o.tensorboard_dir!r}")


def check_writable_dir(path: Path, field: str) -> None:
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
