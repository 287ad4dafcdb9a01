"""The Optuna study behind :class:`~tuner.search.optuna_search.OptunaSearch`: creating it, telling
it outcomes, and saving and restoring it with its trials, attributes and sampler."""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from schedulers.validation import is_seed

__all__ = [
    "add_finished_trial",
    "check_seed",
    "new_study",
    "quiet_optuna",
    "restore_study",
    "save_study",
    "tell",
]

# The searcher's logger: users silence or filter OptunaSearch's warnings by that one name.
logger = logging.getLogger("tuner.search.optuna_search")

MAX_SEED = 2**32 - 1  # numpy's RandomState (used by Optuna's samplers) takes seeds below 2**32


def check_seed(seed: Any, field: str) -> int | None:
    """``seed`` as an int (None stays None); a ValueError naming ``field`` when out of range."""
    if seed is None:
        return None
    if not is_seed(seed, maximum=MAX_SEED):
        raise ValueError(f"{field} must be an integer in [0, 2**32 - 1] or None, got {seed!r}")
    return int(seed)


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Hide Optuna's INFO lines ("A new study created in memory ...") for one call."""
    level = optuna.logging.get_verbosity()
    if level >= optuna.logging.WARNING:
        yield
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


def _direction(mode: str | None) -> Literal["minimize", "maximize"]:
    return "minimize" if mode == "min" else "maximize"


def new_study(sampler: optuna.samplers.BaseSampler, mode: str) -> optuna.Study:
    """An in-memory study that minimizes for ``mode="min"`` and maximizes for ``"max"``."""
    with quiet_optuna():
        return optuna.create_study(sampler=sampler, direction=_direction(mode))


def add_finished_trial(
    study: optuna.Study, params: dict[str, Any], distributions: Mapping[str, BaseDistribution],
    value: float | None, state: TrialState, intermediate_values: list[float] | None,
) -> None:
    """Add a trial that ended elsewhere; ``intermediate_values[i]`` is the metric at step i + 1."""
    trial = optuna.trial.create_trial(
        params=params,
        distributions={name: distributions[name] for name in params},
        value=None if state != TrialState.COMPLETE else float(value),  # type: ignore[arg-type]
        state=state,
        intermediate_values=None if not intermediate_values
        else {i + 1: float(v) for i, v in enumerate(intermediate_values)},
    )
    study.add_trial(trial)


def tell(study: optuna.Study, ot_trial: optuna.trial.Trial, value: float | None,
         state: TrialState) -> None:
    """Tell ``study`` how ``ot_trial`` ended; a failure is logged, not raised."""
    try:
        study.tell(ot_trial, value, state=state)
    except Exception as exc:  # noqa: BLE001 - never let bookkeeping in Optuna break the sweep
        logger.warning("OptunaSearch: could not tell Optuna trial %d: %s", ot_trial.number, exc)


def save_study(study: optuna.Study, mode: str | None) -> dict:
    """The study's direction, sampler (pickled, with its RNG), trials and attributes."""
    try:
        sampler_blob: bytes | None = pickle.dumps(study.sampler)
    except Exception as exc:  # noqa: BLE001 - a user sampler holding something unpicklable
        logger.warning("OptunaSearch: cannot pickle the sampler (%s); a resumed search "
                       "starts a fresh one", exc)
        sampler_blob = None
    return {
        "direction": _direction(mode),
        "sampler": sampler_blob,
        # No deep copy needed (it costs ~0.1 s for 500 trials x 200 results): the
        # in-memory storage replaces a trial object on every update, never mutates it.
        "trials": study.get_trials(deepcopy=False),
        "user_attrs": dict(study.user_attrs),
        "system_attrs": dict(study._storage.get_study_system_attrs(study._study_id)),
    }


def restore_study(
    saved: dict, make_sampler: Callable[[], optuna.samplers.BaseSampler],
) -> tuple[optuna.Study, dict[int, tuple[int, FrozenTrial]]]:
    """The study of :func:`save_study` again, with ``{trial number: (storage id, trial)}``.

    ``make_sampler()`` stands in for a sampler that could not be pickled.
    """
    sampler = None
    if saved.get("sampler") is not None:
        sampler = pickle.loads(saved["sampler"])
    if sampler is None:
        sampler = make_sampler()
    with quiet_optuna():
        study = optuna.create_study(sampler=sampler, direction=saved["direction"])
    storage, study_id = study._storage, study._study_id
    for key, value in saved.get("system_attrs", {}).items():
        storage.set_study_system_attr(study_id, key, value)
    for key, value in saved.get("user_attrs", {}).items():
        study.set_user_attr(key, value)
    by_number: dict[int, tuple[int, FrozenTrial]] = {}
    for frozen in saved["trials"]:
        # Straight into storage: add_trial would re-validate (e.g. reject an out-of-range
        # point a running trial was fixed to), and the trial numbers must stay the same.
        trial_id = storage.create_new_trial(study_id, template_trial=frozen)
        by_number[storage.get_trial_number_from_id(trial_id)] = (trial_id, frozen)
    return study, by_number
