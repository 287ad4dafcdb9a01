"""What the controller asks of a trial actor, with the arguments each request needs.

A trial actor (``trial_actor.TrialActor``) runs iterations (``run``), saves (``save``) and takes a
donor's checkpoint (``exploit``); each request goes out through :class:`~tuner.execution.calls.
Calls`, whose answers the controller's loop reads. A trial's info (its ids, folders, where its
checkpoints go, what the trainable prepared for its config) travels with the requests that
build or rebuild its trainable.
"""

from __future__ import annotations

from typing import Any

from tuner.execution.calls import Calls
from tuner.execution.packed_call import pack
from tuner.execution.protocol import Call
from tuner.execution.slots import Slot, SlotPool
from tuner.execution.trial import Trial
from tuner.execution.trial_checkpoints import TrialCheckpoints
from tuner.trainable.context import TrialInfo
from tuner.trainable.function_trainable import FunctionTrainable
from tuner.trainable.trainable import Trainable

#: How long a trial actor may keep running fast iterations before answering (see TrialActor.run).
RESULT_BATCH_WINDOW_S = 0.005
RESULT_BATCH_MAX = 100


class ActorRequests:
    """Requests to the actors of ``pool``'s running trials. ``batch``: how many iterations a run
    request may answer at once (1 when every result needs its decision before the next runs)."""

    def __init__(self, pool: SlotPool, calls: Calls, checkpoints: TrialCheckpoints,
                 trainable_cls: type[Trainable], *, batch: int, checkpoint_freq: int) -> None:
        self._pool = pool
        self._calls = calls
        self._checkpoints = checkpoints
        self._trainable_cls = trainable_cls
        self._batch = batch
        # A function trainable checkpoints when it reports one, never on the engine's schedule.
        self._checkpoint_freq = 0 if issubclass(trainable_cls, FunctionTrainable) else checkpoint_freq
        self._prepared: dict[str, tuple[dict[str, Any], Any]] = {}  # trial id -> (config, prepare_trial's)

    def prepared(self, trial: Trial) -> Any:
        """The trainable's ``prepare_trial`` of the trial's current config, worked out once per
        config (an exploit gives the trial a new one)."""
        held = self._prepared.get(trial.trial_id)
        if held is None or held[0] is not trial.config:
            held = self._prepared[trial.trial_id] = (trial.config, self._trainable_cls.prepare_trial(trial.config))
        return held[1]

    def info(self, trial: Trial, *, new_group: bool = False) -> TrialInfo:
        """The trial's info for its actor (``new_group``: in a placement group placed just now)."""
        return self._checkpoints.place(trial, trial.info(prepared=self.prepared(trial)), new_group=new_group)

    def start(self, trial: Trial, slot: Slot, reapply_config: bool) -> None:
        """Start the trial on ``slot``'s actor: build its trainable (restored from its checkpoint,
        ``reapply_config`` after an exploit) and run its first iterations."""
        run_args = dict(
            max_results=self._batch,
            window_s=RESULT_BATCH_WINDOW_S,
            trainable_cls=None if slot.has_trainable else self._trainable_cls,
            config=trial.config,
            info=self.info(trial, new_group=not slot.has_trainable),
            checkpoint_path=trial.checkpoint_path,
            checkpoint_freq=self._checkpoint_freq,
            reapply_config=reapply_config,
            progress=trial.own_progress if trial.checkpoint_path else None,
        )
        # A reused actor already holds the class: the rest packs into one cheap argument.
        packed = pack(run_args) if slot.has_trainable else None
        if packed is not None:
            self._calls.send(trial, Call.RUN, slot.actor, "run_packed", packed)
        else:
            self._calls.send(trial, Call.RUN, slot.actor, "run", **run_args)
        slot.has_trainable = True

    def run(self, trial: Trial) -> None:
        """The running trial's next iterations."""
        self._calls.send(trial, Call.RUN, self._actor(trial), "run", self._batch, RESULT_BATCH_WINDOW_S)

    def exploit(self, trial: Trial, donor_checkpoint: str) -> None:
        """The running trial takes ``donor_checkpoint`` and its (new) config before it runs on."""
        self._calls.send(trial, Call.EXPLOIT, self._actor(trial), "exploit", trial.config, donor_checkpoint,
                         self.info(trial))

    def save(self, trial: Trial, then: Call) -> None:
        """Save the running trial; ``then`` says what for (answered with the checkpoint's path)."""
        self._calls.send(trial, then, self._actor(trial), "save")

    def _actor(self, trial: Trial) -> Any:
        return self._pool.running[trial.trial_id].actor
