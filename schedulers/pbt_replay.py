"""Replay a PBT trial's schedule of configs on one new trial (Ray Tune's ``PopulationBasedTrainingReplay``).

Population Based Training does not end with one config but with a schedule: the model a PBT
trial ends with was trained with its ancestors' configs, changing at every exploit that led to
it. This scheduler trains one new trial along that schedule: it starts with the schedule's
first config and, once the trial has reported the ``training_iteration`` of a change, switches
to the next config. Each switch keeps the trial's own weights: the trial is paused with a
checkpoint of its own and restarts from it with the new config applied on top (the controller's
exploit path with the trial as its own donor, so ``reset_config`` is used where the trainable
has it, and the change is recorded in the store like an exploit). No other trial's checkpoint
is ever loaded. A trainable that cannot checkpoint (a function that reports no checkpoint)
cannot switch: each change is then skipped with a warning. The trial's config is compared with
the schedule's at each result, so a resumed replay carries on where it was (results replayed from
the store into a resumed sweep are not decided on again).

The schedule comes from one of:

- a stored sweep: its run directory (``storage_path/name``, or with ``database_url`` the sweep
  of that name in a shared database, as ``tune.load`` takes them) and ``trial_id``, one of its
  trials that exploited at least once (see :mod:`tuner.pbt_policy`);
- a policy file: Ray Tune's ``pbt_policy_<trial>.txt`` (JSON lines ``[old_tag, new_tag,
  old_step, new_step, old_config, new_config]``), or one written by
  ``tuner.pbt_policy.export_pbt_policy``.

Like Ray Tune's, the schedule is the lineage of the trial's last weights, traced back through the
donors whose checkpoints it took, in ``training_iteration`` of those weights (what a trial that
never exploits counts). Ray Tune applies one change per result; here every change due at a result
is applied at once (the last one wins), which only differs for a file listing two changes at
one step.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from schedulers._common import arg_error
from schedulers.trial_scheduler import ControllerLike, TrialLike, TrialScheduler
from schedulers.validation import is_int, is_number

__all__ = ["PBTPolicy", "PopulationBasedTrainingReplay", "policy_from_records", "read_policy_file"]

logger = logging.getLogger(__name__)

_OWNER = "PopulationBasedTrainingReplay"


@dataclasses.dataclass(frozen=True)
class PBTPolicy:
    """A schedule of configs: ``initial_config`` (None when unknown), then ``changes``, each
    ``(step, config)``: the config from the iteration after ``step`` on, in order of ``step``."""

    initial_config: dict[str, Any] | None
    changes: tuple[tuple[int, dict[str, Any]], ...]

    def config_at(self, step: int) -> dict[str, Any] | None:
        """The config the trial should have once it reported iteration ``step``."""
        config = self.initial_config
        for at, new in self.changes:
            if at <= step:
                config = new
        return config


def policy_from_records(records: Sequence[Sequence[Any]]) -> PBTPolicy:
    """A policy from PBT policy records ``[old_tag, new_tag, old_step, new_step, old_config,
    new_config]``, oldest first: Ray Tune's reading. From the last record back, records chain
    while each one's ``new_tag`` is the previous (older) one's ``old_tag``; the chain's oldest
    ``old_config`` is the initial config, and each record changes to ``new_config`` at ``new_step``."""
    changes: list[tuple[int, dict[str, Any]]] = []
    initial: dict[str, Any] | None = None
    last_new_tag = None
    for row in reversed(records):
        if not isinstance(row, Sequence) or isinstance(row, (str, bytes)) or len(row) != 6:
            raise ValueError(f"a PBT policy record must be a list of 6 values, got {row!r}")
        old_tag, new_tag, _old_step, new_step, old_config, new_config = row
        if last_new_tag is not None and old_tag != last_new_tag:
            break  # older records are of weights a later exploit replaced
        if not is_number(new_step) or not isinstance(new_config, dict) or not isinstance(old_config, dict):
            raise ValueError(f"a PBT policy record needs a numeric step and two config dicts, got {row!r}")
        last_new_tag = new_tag
        initial = old_config
        changes.append((int(new_step), new_config))
    return PBTPolicy(initial, tuple(reversed(changes)))


def read_policy_file(path: str | os.PathLike[str]) -> PBTPolicy:
    """The policy in a PBT policy file (JSON lines, Ray Tune's ``pbt_policy_<trial>.txt`` format)."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise ValueError(f"{_OWNER}: could not read PBT policy file {os.fspath(path)}: line {number} "
                                 "is not JSON") from None
    try:
        return policy_from_records(records)
    except ValueError as exc:
        raise ValueError(f"{_OWNER}: could not read PBT policy file {os.fspath(path)}: {exc}") from None


#: Reads the schedule of a stored sweep's trial: ``(run_dir, trial_id, database_url) -> PBTPolicy``.
#: The store is the tuner package's, a layer above this one: ``import tuner`` hands its reader
#: here (:func:`set_stored_policy_reader`), so the policy comes in as data and this package
#: imports nothing of tuner.
StoredPolicyReader = Callable[[Path, str, "str | None"], PBTPolicy]
_stored_policy_reader: StoredPolicyReader | None = None


def set_stored_policy_reader(reader: StoredPolicyReader | None) -> None:
    """Set the function that reads a stored sweep's PBT schedule (``tuner`` sets it on import)."""
    global _stored_policy_reader
    _stored_policy_reader = reader


def _stored_policy(path: Path, trial_id: str, database_url: str | None) -> PBTPolicy:
    if _stored_policy_reader is None:
        raise ValueError(f"{_OWNER}: {os.fspath(path)!r} is a stored sweep, which the tuner package reads: import "
                         "tuner first, or pass a PBT policy file")
    return _stored_policy_reader(path, trial_id, database_url)


class PopulationBasedTrainingReplay(TrialScheduler):
    """Train one trial along the config schedule of a stored PBT trial.

    Args:
        policy_file: a stored sweep's run directory (then ``trial_id`` names the trial to replay),
            or a PBT policy file (Ray Tune's ``pbt_policy_<trial>.txt`` format).
        trial_id: the stored trial whose schedule is replayed; only with a stored sweep.
        database_url: the database holding the sweep, when not the SQLite file in its run
            directory; ``policy_file``'s last part is then the sweep's name (``tune.load``'s rule).

    Run it with ``num_samples=1`` and no search space: the trial's config is the schedule's
    (a config given to ``tune.run`` is replaced, with a warning, as in Ray Tune). Errors, each a
    ValueError naming the argument, come from the constructor: no such file or sweep, no such
    trial, a trial that never exploited (its config never changed: nothing to replay), a
    ``trial_id`` with a policy file. A second trial is refused when it is added.

    Example:
        >>> import json, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "pbt_policy_a.txt")
        >>> with open(path, "w") as f:
        ...     print(json.dumps(["a", "b", 4, 4, {"lr": 0.1}, {"lr": 0.05}]), file=f)
        >>> replay = PopulationBasedTrainingReplay(path)
        >>> replay.policy.initial_config, replay.policy.changes
        ({'lr': 0.1}, ((4, {'lr': 0.05}),))
    """

    never_pauses = False

    def __init__(
        self,
        policy_file: str | os.PathLike[str],
        trial_id: str | None = None,
        database_url: str | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(policy_file, (str, os.PathLike)) or not os.fspath(policy_file):
            raise arg_error(_OWNER, "policy_file", "a path (a policy file or a sweep's run directory)", policy_file)
        if trial_id is not None and (not isinstance(trial_id, str) or not trial_id):
            raise arg_error(_OWNER, "trial_id", "a trial id (a non-empty string) or None", trial_id)
        if database_url is not None and (not isinstance(database_url, str) or not database_url):
            raise arg_error(_OWNER, "database_url", "a database URL (a non-empty string) or None", database_url)
        path = Path(os.fspath(policy_file)).expanduser()
        if database_url is not None or path.is_dir():
            if trial_id is None:
                raise ValueError(f"{_OWNER}: trial_id is required with a stored sweep ({os.fspath(policy_file)!r}): "
                                 "name the trial whose schedule to replay")
            self.policy = _stored_policy(path, trial_id, database_url)
        elif path.is_file():
            if trial_id is not None:
                raise ValueError(f"{_OWNER}: trial_id={trial_id!r} is only for a stored sweep; the policy file "
                                 f"{os.fspath(policy_file)!r} holds the schedule of one trial already")
            self.policy = read_policy_file(path)
        else:
            raise ValueError(f"{_OWNER}: policy_file {os.fspath(policy_file)!r} is neither a policy file nor a "
                             "sweep's run directory (pass database_url=... for a sweep in a shared database)")
        self.policy_file = os.fspath(policy_file)
        self.source_trial_id = trial_id
        self._trial_id: str | None = None
        self._num_changes = 0
        self._skipped: set[int] = set()  # the changes that could not be made

    # -- hooks -----------------------------------------------------------------------------------
    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        if self._trial_id is not None and trial.trial_id != self._trial_id:
            raise ValueError(
                f"{_OWNER}: more than one trial added to a PBT replay, which would train the same schedule "
                "several times; run it with num_samples=1"
            )
        self._trial_id = trial.trial_id
        if trial.last_result:
            return  # a resumed trial keeps its stored config; its next result brings it in line
        initial = self.policy.initial_config
        if initial is None or not self.policy.changes:
            if not trial.config:
                raise ValueError(f"{_OWNER}: the policy holds no config and the trial has none; pass a config "
                                 "to tune.run or replay a trial that exploited")
            return  # Ray Tune: no change recorded, the trial trains with its own config
        if trial.config and trial.config != initial:
            logger.warning("%s: the trial's config %r is replaced by the schedule's initial config %r (run a "
                           "replay without a config)", _OWNER, trial.config, initial)
        trial.config = copy.deepcopy(initial)

    def on_trial_result(self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]) -> str:
        reported: Any = result.get("training_iteration")
        if not is_int(reported) and not is_number(reported):
            return self.CONTINUE
        step = int(reported)
        latest: Any = (trial.last_result or {}).get("training_iteration")
        if is_number(latest) and step < latest:
            return self.CONTINUE  # an older result, replayed into a resumed sweep: decided on before
        target = self.policy.config_at(step)
        due = [at for at, _ in self.policy.changes if at <= step]
        if target is None or trial.config == target or (due and due[-1] in self._skipped):
            return self.CONTINUE
        controller.checkpoint_trial(trial)  # its own state now: the change keeps its weights
        if controller.exploit_trial(trial, trial, copy.deepcopy(target)) is False:
            if due:
                self._skipped.add(due[-1])
            logger.warning("%s: cannot change trial %s's config at iteration %d: it has no checkpoint to restart "
                           "from (a function trainable must report checkpoints); it goes on with %r",
                           _OWNER, trial.trial_id, step, trial.config)
            return self.CONTINUE
        self._num_changes += 1
        logger.info("%s: trial %s at iteration %d switches to %r", _OWNER, trial.trial_id, step, target)
        return self.PAUSE

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(trial_id=self._trial_id, num_changes=self._num_changes, skipped=sorted(self._skipped))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._trial_id = state.get("trial_id")
        self._num_changes = int(state.get("num_changes", 0))
        self._skipped = set(state.get("skipped", ()))

    def debug_string(self) -> str:
        return f"PopulationBasedTraining replay: {self._num_changes} of {len(self.policy.changes)} changes made"
