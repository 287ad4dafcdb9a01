"""The class API of a trial: ``tune.Trainable``."""

from __future__ import annotations

import copy
import json
import os
import pickle
import time
from pathlib import Path
from typing import Any, ClassVar, Hashable, Mapping, Sequence

from tuner.trainable.checkpoint import atomic_file
from tuner.trainable.context import TrialInfo

#: Keys the engine adds to every result.
AUTO_RESULT_KEYS = (
    "training_iteration",
    "time_this_iter_s",
    "time_total_s",
    "timestamp",
    "trial_id",
    "done",
    "iterations_since_restore",
)
_METADATA_FILE = ".tune_metadata.json"
_DICT_CHECKPOINT_FILE = "_dict_checkpoint.pkl"

Bundles = list[dict[str, float]]


class Trainable:
    """Subclass this to tune a stateful trainer, one ``step()`` per iteration.

    Override ``setup``, ``step``, and for pausing, resuming and fault tolerance,
    ``save_checkpoint`` and ``load_checkpoint``. ``reset_config`` lets an actor be
    reused for a new config without a new ``setup``; ``default_resource_request``
    declares the placement-group bundles a trial needs (bundle 0 hosts the trainable,
    the rest are for actors the trainable starts itself).

    Example:
        >>> class Quadratic(Trainable):
        ...     def setup(self, config):
        ...         self.x = 0.0
        ...     def step(self):
        ...         self.x += self.config["lr"] * (3.0 - self.x)
        ...         return {"loss": (3.0 - self.x) ** 2}
        >>> t = Quadratic({"lr": 0.5})
        >>> round(t.train()["loss"], 3)
        2.25
    """

    def __init__(self, config: Mapping[str, Any] | None = None, trial_info: TrialInfo | None = None) -> None:
        self.config: dict[str, Any] = copy.deepcopy(dict(config or {}))
        self._trial_info = trial_info
        self._iteration = 0
        self._time_total = 0.0
        self._iterations_since_restore = 0
        self._latest_checkpoint: str | None = None
        if trial_info is not None:
            from tuner.trainable import session

            session._set_trial_info(trial_info)
        self.setup(copy.deepcopy(self.config))

    # -- to override ---------------------------------------------------------------------
    def setup(self, config: dict[str, Any]) -> None:
        """Build the trainer for ``config`` (called once, in the trial actor)."""

    def step(self) -> dict[str, Any]:
        """Run one training iteration and return its metrics."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | str | None:
        """Write state into ``checkpoint_dir``; may instead return a dict of plain data to store."""
        return None

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        """Restore from what ``save_checkpoint`` wrote (the directory, or the dict it returned)."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Apply ``new_config`` in place and return True, or return False to be rebuilt."""
        return False

    def cleanup(self) -> None:
        """Release what ``setup`` acquired (actors, files, threads)."""

    @classmethod
    def default_resource_request(cls, config: Mapping[str, Any]) -> Sequence[Mapping[str, float]] | None:
        """The placement-group bundles one trial of ``config`` needs, or None for the default."""
        return None

    #: True when a running trial can take new resources in place (:meth:`update_resources`); a
    #: ``ResourceChangingScheduler`` otherwise pauses the trial and restarts it with them (Ray Tune's way).
    supports_elastic_resources: ClassVar[bool] = False

    @classmethod
    def accepts_resources(cls, config: Mapping[str, Any], bundles: Sequence[Mapping[str, float]],
                          prepared: Any = None) -> bool:
        """Whether a running trial of ``config`` can take the placement-group ``bundles`` in place
        (asked in the driver before anything is reserved; ``prepared``: what :meth:`prepare_trial`
        made of the config). False by default."""
        return False

    def update_resources(self, new_resources: Bundles, placement_groups: Sequence[Any] = ()) -> bool:
        """The trial's resources changed while it runs: ``new_resources`` are all its bundles now.

        Ray Tune's hook, with a way to take them in place: the bundles past those of the trial's own
        placement group are each in a placement group of their own, ``placement_groups[i]`` holding
        bundle ``len(own) + i`` as its bundle 0 (a Ray placement group cannot be resized, so growth
        reserves new groups beside the trial's). Bundles removed are given back once this returns:
        release what runs in them first. Return True when taken in place; False (the default) when
        the trial must be restarted with them instead."""
        return False

    @classmethod
    def check_metric(cls, metric: str, config: Mapping[str, Any]) -> None:
        """Raise ValueError when a trial of ``config`` could never report the sweep's ``metric``
        (a trainer's evaluation key with evaluation off, say); asked in the driver before the
        trial is added. Nothing by default: the first result shows what a trainable reports."""

    @classmethod
    def prepare_trial(cls, config: Mapping[str, Any]) -> Any:
        """What the driver works out once for a trial's ``config`` and hands to the trial's actor
        with the trial, as ``self.get_trial_info().prepared``: a trainer's resolved config, say,
        so the trial does not resolve it again (and perhaps differently) in its own process.
        Runs in the driver for each config a trial starts or is exploited with; the result must
        pickle. None (the default): nothing."""
        return None

    @classmethod
    def pack_signature(cls, config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
        """``(signature, how)`` when trials of ``config`` can run packed (``tune.run``'s
        ``pack_trials``): trials with equal signatures share one population learner, and ``how``
        says in a few words what runs; ``(None, why not)`` when they cannot. Asked in the driver."""
        return None, f"{cls.__name__} does not pack trials"

    @classmethod
    def pack_shape_keys(cls) -> tuple[str, ...]:
        """The config keys that fix a pack's shape (members of a pack share their values)."""
        return ()

    @classmethod
    def packed_trainable(cls) -> type[Trainable] | None:
        """The trainable each member of a pack runs as (see ``tuner.trainable.pack``); None: none."""
        return None

    # -- engine side -----------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        return self._iteration

    def progress(self) -> tuple[int, float]:
        """``(iteration, time_total_s)``: the counters a PBT exploit keeps across a restore."""
        return self._iteration, self._time_total

    def set_progress(self, iteration: int, time_total_s: float) -> None:
        """Set the counters back to what :meth:`progress` returned (the trial actor, after an exploit)."""
        self._iteration, self._time_total = iteration, time_total_s

    def get_trial_info(self) -> TrialInfo | None:
        """The trial this trainable runs as; None outside a sweep."""
        return self._trial_info

    @property
    def trial_resources(self) -> Any:
        """The resources this trial runs with, as a PlacementGroupFactory (Ray Tune's property);
        None outside a sweep. A ``ResourceChangingScheduler`` restarting the trial changes them."""
        if self._trial_info is None:
            return None
        from tuner.execution.resources import PlacementGroupFactory

        return PlacementGroupFactory(list(self._trial_info.resources))

    def set_trial_info(self, info: TrialInfo | None) -> None:
        """Run as trial ``info`` from now on (the trial actor, after an exploit)."""
        self._trial_info = info

    def note_checkpoint(self, checkpoint_dir: str) -> None:
        """Record ``checkpoint_dir`` as the latest checkpoint (one the trial actor moved into place)."""
        self._latest_checkpoint = checkpoint_dir

    training_iteration = iteration

    @property
    def trial_id(self) -> str:
        return self._trial_info.trial_id if self._trial_info else "default"

    @property
    def trial_name(self) -> str:
        return self._trial_info.trial_name if self._trial_info else "default"

    @property
    def logdir(self) -> str:
        return self._trial_info.trial_dir if self._trial_info else os.getcwd()

    def train(self) -> dict[str, Any]:
        """Run ``step()`` once and return its result with the engine's fields added."""
        start = time.time()
        result = self.step()
        if not isinstance(result, dict):
            raise TypeError(f"{type(self).__name__}.step() must return a dict, got {type(result).__name__}")
        return self._complete_result(result, time.time() - start)

    def _complete_result(
        self, result: dict[str, Any], elapsed: float, timestamp: float | None = None
    ) -> dict[str, Any]:
        self._iteration += 1
        self._iterations_since_restore += 1
        self._time_total += elapsed
        result = dict(result)
        result.setdefault("done", False)
        result["training_iteration"] = self._iteration
        result["time_this_iter_s"] = elapsed
        result["time_total_s"] = self._time_total
        result["timestamp"] = time.time() if timestamp is None else timestamp
        result["trial_id"] = self.trial_id
        result["iterations_since_restore"] = self._iterations_since_restore
        return result

    def save(self, checkpoint_dir: str) -> str:
        """Save into ``checkpoint_dir`` (created) and return it."""
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        data = self.save_checkpoint(checkpoint_dir)
        if isinstance(data, dict):
            with atomic_file(os.path.join(checkpoint_dir, _DICT_CHECKPOINT_FILE)) as f:
                pickle.dump(data, f)
        self.write_metadata(checkpoint_dir)
        return checkpoint_dir

    def write_metadata(self, checkpoint_dir: str) -> None:
        """Record the iteration and time counters in ``checkpoint_dir`` so a restore continues them."""
        meta = {"iteration": self._iteration, "time_total_s": self._time_total}
        with atomic_file(os.path.join(checkpoint_dir, _METADATA_FILE), "w") as f:
            json.dump(meta, f)

    def restore(self, checkpoint_dir: str) -> None:
        """Restore state and counters from a directory written by ``save``."""
        meta_path = os.path.join(checkpoint_dir, _METADATA_FILE)
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                meta = json.load(f)
            self._iteration = int(meta.get("iteration", 0))
            self._time_total = float(meta.get("time_total_s", 0.0))
        self._iterations_since_restore = 0
        self._latest_checkpoint = checkpoint_dir
        dict_path = os.path.join(checkpoint_dir, _DICT_CHECKPOINT_FILE)
        if os.path.exists(dict_path):
            with open(dict_path, "rb") as f:
                self.load_checkpoint(pickle.load(f))
        else:
            self.load_checkpoint(checkpoint_dir)

    def stop(self) -> None:
        """Release resources (calls ``cleanup``)."""
        self.cleanup()
