"""Ray Tune's own PBT-family schedulers (``PopulationBasedTraining``, ``PB2``) behind our scheduler
protocol, so that :mod:`schedulers.simulator` drives them on the same curves as ours.

Ray Tune's PBT talks to its ``TuneController`` and ``Trial`` directly: it schedules saves
(``_schedule_trial_save``), pauses the trial it exploits (``pause_trial``, then answers ``NOOP``)
and hands it the donor's checkpoint through the trial's checkpoint manager. Each of these maps
onto one call of the protocol the simulator plays (``checkpoint_trial``, ``exploit_trial``, an
answer of PAUSE), which is all this module does.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping

from schedulers import PAUSED, TrialScheduler
from schedulers.trial_status import ENDED


class _CheckpointManager:
    """The piece of a Ray ``Trial`` through which Ray's PBT hands over the donor's checkpoint."""

    checkpoint_config = SimpleNamespace(num_to_keep=None)

    def __init__(self, trial: "_RayTrial") -> None:
        self._trial = trial

    @property
    def _latest_checkpoint_result(self) -> Any:
        return None

    @_latest_checkpoint_result.setter
    def _latest_checkpoint_result(self, training_result: Any) -> None:
        # Ray's exploit: the trial goes on from this checkpoint with the config it was just given.
        donor = SimpleNamespace(trial_id="donor", checkpoint_path=training_result.checkpoint)
        trial = self._trial
        trial.sim.exploit_trial(trial.sim_trial, donor, trial.new_config)


class _RayTrial:
    """What Ray Tune's PBT reads and writes of a trial, backed by a simulated trial."""

    def __init__(self, sim: Any, sim_trial: Any) -> None:
        self.sim, self.sim_trial = sim, sim_trial
        self.experiment_tag = sim_trial.trial_id
        self.evaluated_params: dict[str, Any] = {}
        self.run_metadata = SimpleNamespace(checkpoint_manager=_CheckpointManager(self))
        self.temporary_state = SimpleNamespace(saving_to=None)
        self.pause_requested = False
        self.new_config: dict[str, Any] | None = None

    trial_id = property(lambda self: self.sim_trial.trial_id)
    config = property(lambda self: self.sim_trial.config)
    last_result = property(lambda self: self.sim_trial.last_result)
    checkpoint = property(lambda self: self.sim_trial.checkpoint_path)

    @property
    def status(self) -> str:
        return PAUSED if self.pause_requested else self.sim_trial.status

    def is_finished(self) -> bool:
        return self.sim_trial.status in ENDED

    def set_experiment_tag(self, tag: str) -> None:
        self.experiment_tag = tag

    def set_config(self, config: dict[str, Any]) -> None:
        self.new_config = config

    def __str__(self) -> str:  # Ray's PB2 keys its data by str(trial)
        return self.trial_id

    __repr__ = __str__


class _RayController:
    """What Ray Tune's PBT asks of its ``TuneController``."""

    search_alg = None

    def __init__(self, driver: "RayTuneDriven", sim: Any) -> None:
        self._driver, self._sim = driver, sim

    def get_trials(self) -> list[_RayTrial]:
        return [self._driver.wrap(self._sim, t) for t in self._sim.get_trials()]

    def get_live_trials(self) -> list[_RayTrial]:
        return [self._driver.wrap(self._sim, t) for t in self._sim.get_live_trials()]

    def _schedule_trial_save(self, trial: _RayTrial, result: Any = None) -> Any:
        self._sim.checkpoint_trial(trial.sim_trial)
        return trial.sim_trial.checkpoint_path

    def pause_trial(self, trial: _RayTrial, should_checkpoint: bool = True) -> None:
        trial.pause_requested = True


class RayTuneDriven(TrialScheduler):
    """``ray_scheduler`` (Ray Tune's PBT or PB2, built with ``log_config=False``) under our protocol."""

    def __init__(self, ray_scheduler: Any) -> None:
        super().__init__()
        self.inner = ray_scheduler
        self._trials: dict[str, _RayTrial] = {}

    def wrap(self, sim: Any, sim_trial: Any) -> _RayTrial:
        if sim_trial.trial_id not in self._trials:
            self._trials[sim_trial.trial_id] = _RayTrial(sim, sim_trial)
        return self._trials[sim_trial.trial_id]

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return self.inner.set_search_properties(metric, mode, **spec)

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        self.inner.on_trial_add(_RayController(self, controller), self.wrap(controller, trial))

    def on_trial_result(self, controller: Any, trial: Any, result: Mapping[str, Any]) -> str:
        wrapped = self.wrap(controller, trial)
        try:
            decision = self.inner.on_trial_result(_RayController(self, controller), wrapped, dict(result))
            paused = wrapped.pause_requested
        finally:
            wrapped.pause_requested = False
        return self.PAUSE if paused or decision == "NOOP" else decision

    def on_trial_complete(self, controller: Any, trial: Any, result: Mapping[str, Any] | None) -> None:
        self.inner.on_trial_complete(_RayController(self, controller), self.wrap(controller, trial), result)

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        self.inner.on_trial_remove(_RayController(self, controller), self.wrap(controller, trial))

    def choose_trial_to_run(self, controller: Any) -> Any:
        chosen = self.inner.choose_trial_to_run(_RayController(self, controller))
        return None if chosen is None else chosen.sim_trial
