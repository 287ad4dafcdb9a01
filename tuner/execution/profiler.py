"""Where a sweep's wall time went: the controller's side of ``tuner show NAME --profile``.

The sweep's capacity is its wall time times the CPUs of the cluster (CPU-seconds). Every
CPU-second is either

* **engine start** (before the controller's loop: starting or joining Ray; the rest: imports,
  validation, the store) or **shutdown** (after it), all CPUs;
* held by a trial, from the moment its placement group is taken to the moment it is given back
  (``hold``, times the trial's CPUs), split by what the trial actor reports:

  - **trial start**: a new actor's boot, then building the trainable (``setup``, a restore);
  - **rollout actors' start**: a trainer's rollout actors, from their creation (or from being
    taken over from the trial before) to their first fragment (the trainer's
    ``worker_start_time_s``), counted apart from the part it overlapped: the trial's own set-up
    (``worker_start_in_setup_s``, out of trial start) and then its first sampling (the rest);
  - **sampling** and **learning**: the trainer's own timers (``sample_time_s`` and
    ``learn_time_s`` in its results; PPO reports both);
  - **other training**: the rest of ``step()`` (everything for trainables without timers);
  - **trial stop**: the trainable's ``cleanup`` (rollout actors stopped);
  - **waiting on the controller**: held but idle: results in transit, the driver's decisions,
    store and export work on the critical path;
* or **idle** (no trial holds it), measured as the integral of the CPUs nobody holds.

The parts are measured independently, so their sum checks the accounting: it equals the wall
time times the CPUs to within the clock's resolution, unless something is missed. The driver's
own work (scheduler and searcher decisions, store writes, callbacks such as the TensorBoard
export) runs next to the trials; it is listed beside the table, not inside it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from tuner.execution.protocol import ActorTiming

#: Per-trial parts, in the order of the table.
TRIAL_PARTS = ("start", "rollout_start", "sampling", "learning", "other_training", "stop", "waiting")
#: The driver's work, beside the table.
DRIVER_PARTS = ("scheduler", "searcher", "store", "callbacks")
#: Result keys a trainer may report its own timers under.
SAMPLE_KEY, LEARN_KEY, ROLLOUT_START_KEY = "sample_time_s", "learn_time_s", "worker_start_time_s"
ROLLOUT_IN_SETUP_KEY = "worker_start_in_setup_s"


@dataclasses.dataclass
class TrialProfile:
    """Seconds of one trial's lifetime on its resources (wall seconds; times ``cpus`` for CPU-s)."""

    cpus: float = 0.0
    hold: float = 0.0
    cpu_hold: float = 0.0  # CPU-seconds held: ``hold`` times the CPUs, which change when it grows
    boot: float = 0.0
    setup: float = 0.0
    rollout_start: float = 0.0  # the rollout actors' start: part set-up, part sampling
    rollout_in_setup: float = 0.0  # the part of it during the trial's set-up
    sampling: float = 0.0
    learning: float = 0.0
    stepping: float = 0.0  # all of step(), sampling and learning included
    stop: float = 0.0
    others_stop: float = 0.0  # an earlier trial's cleanup, done on this trial's resources

    def parts(self) -> dict[str, float]:
        """The trial's parts (:data:`TRIAL_PARTS`), in wall seconds. They add up to ``hold``,
        but for cleanups: the trial's own ``stop`` is counted here (it runs after the trial gave its
        resources back, or at the start of the next trial's call), an earlier trial's is not."""
        other = max(self.stepping - self.sampling - self.learning, 0.0)
        busy = self.boot + self.setup + self.stepping + self.others_stop
        sampling = min(self.sampling, self.stepping)
        in_setup = min(self.rollout_in_setup, self.rollout_start, self.setup)
        in_sampling = min(self.rollout_start - in_setup, sampling)
        return {
            "start": self.boot + self.setup - in_setup,
            "rollout_start": in_setup + in_sampling,
            "sampling": sampling - in_sampling,
            "learning": min(self.learning, max(self.stepping - self.sampling, 0.0)),
            "other_training": other,
            "stop": self.stop,
            "waiting": max(self.hold - busy, 0.0),  # the trial's own stop lies outside its hold
        }

    def as_row(self) -> dict[str, float]:
        # A trial that grew or shrank in place (ResourceChangingScheduler) counts with the CPUs it
        # held on average over its hold, so its parts add up to the CPU-seconds it held.
        cpus = self.cpu_hold / self.hold if self.hold > 0 and self.cpu_hold > 0 else self.cpus
        return {"cpus": cpus, "hold_s": self.hold, **{f"{k}_s": v for k, v in self.parts().items()}}


class SweepProfiler:
    """Collects the profile while the controller runs (single-threaded: the controller's loop)."""

    def __init__(self, total_cpus: float, called_at: float | None = None, ray_start_s: float = 0.0,
                 stored: Mapping[str, Mapping[str, float]] | None = None) -> None:
        """``called_at``: ``time.monotonic()`` when ``tune.run`` was called; ``ray_start_s``: the
        part of the engine start spent starting (or joining) Ray; ``stored``: the trial rows an
        earlier run of this sweep stored (a resume adds to them)."""
        self.total_cpus = float(total_cpus)
        self.ray_start_s = float(ray_start_s)
        self._stored = {k: dict(v) for k, v in (stored or {}).items()}
        self.called_at = time.monotonic() if called_at is None else called_at
        self.loop_started: float | None = None
        self.loop_ended: float | None = None
        self.trials: dict[str, TrialProfile] = {}
        self.driver = dict.fromkeys(DRIVER_PARTS, 0.0)
        self._held: dict[str, tuple[float, float]] = {}  # trial -> (since, cpus)
        self._held_cpus = 0.0
        self._idle = 0.0
        self._idle_since: float | None = None
        self._submitted: dict[str, float] = {}  # trial -> when its first call on a new actor was sent
        self._changed: set[str] = set()  # trials whose stored row is out of date

    # -- the loop ----------------------------------------------------------------------------
    def loop_start(self) -> None:
        self.loop_started = self._idle_since = time.monotonic()

    def loop_end(self) -> list[str]:
        """The loop ended: trials still holding resources give them back; returns their ids."""
        now = time.monotonic()
        held = list(self._held)
        for trial_id in held:
            self.release(trial_id, now)
        self._account_idle(now)
        self.loop_ended = now
        return held

    def _account_idle(self, now: float) -> None:
        if self._idle_since is not None:
            self._idle += max(self.total_cpus - self._held_cpus, 0.0) * (now - self._idle_since)
            self._idle_since = now

    # -- trials --------------------------------------------------------------------------------
    def acquire(self, trial_id: str, cpus: float, new_actor: bool) -> None:
        """A trial took a placement group (a new one when ``new_actor``) and its first call is sent."""
        now = time.monotonic()
        self._account_idle(now)
        profile = self.trials.setdefault(trial_id, TrialProfile())
        profile.cpus = float(cpus)
        self._held[trial_id] = (now, float(cpus))
        self._held_cpus += float(cpus)
        if new_actor:
            self._submitted[trial_id] = time.time()

    def resize(self, trial_id: str, cpus: float) -> None:
        """The trial holds ``cpus`` CPUs from now on (extension groups placed or given back)."""
        held = self._held.get(trial_id)
        if held is None:
            return
        now = time.monotonic()
        self._account_idle(now)
        since, before = held
        profile = self.trials[trial_id]
        profile.hold += now - since
        profile.cpu_hold += (now - since) * before
        self._held[trial_id] = (now, float(cpus))
        self._held_cpus += float(cpus) - before

    def release(self, trial_id: str, now: float | None = None) -> bool:
        """The trial gave its placement group back (ended, paused, failed); False if it held none."""
        held = self._held.pop(trial_id, None)
        if held is None:
            return False
        now = time.monotonic() if now is None else now
        self._account_idle(now)
        since, cpus = held
        self._held_cpus -= cpus
        self.trials[trial_id].hold += now - since
        self.trials[trial_id].cpu_hold += (now - since) * cpus
        self._submitted.pop(trial_id, None)
        self._changed.add(trial_id)
        return True

    def take_changed(self) -> list[str]:
        """Trials whose figures changed since the last call (their rows are due in the store)."""
        changed, self._changed = sorted(self._changed), set()
        return changed

    def trial_row(self, trial_id: str) -> dict[str, float]:
        """The trial's row for the store: this run's figures plus what earlier runs stored."""
        row = self.trials[trial_id].as_row()
        for key, value in self._stored.get(trial_id, {}).items():
            if key != "cpus":
                row[key] = row.get(key, 0.0) + value
        return row

    def actor_timing(self, trial_id: str, timing: ActorTiming, results: list[Mapping[str, Any]]) -> None:
        """What a trial actor's ``run`` call reported (``RunReply.timing``) and its results."""
        profile = self.trials.setdefault(trial_id, TrialProfile())
        sent = self._submitted.pop(trial_id, None)
        if sent is not None and timing.began:
            profile.boot += max(float(timing.began) - sent, 0.0)
        profile.setup += float(timing.setup_s)
        profile.stepping += float(timing.step_s)
        for result in results:
            sample, learn, rollout_start = result.get(SAMPLE_KEY), result.get(LEARN_KEY), result.get(ROLLOUT_START_KEY)
            in_setup = result.get(ROLLOUT_IN_SETUP_KEY)
            if isinstance(sample, (int, float)):
                profile.sampling += float(sample)
            if isinstance(rollout_start, (int, float)):
                profile.rollout_start += float(rollout_start)
            if isinstance(in_setup, (int, float)):
                profile.rollout_in_setup += float(in_setup)
            if isinstance(learn, (int, float)):
                profile.learning += float(learn)
        if timing.stopped:  # the cleanup of the actor's previous trial
            previous, seconds, in_call = timing.stopped
            earlier = self.trials.setdefault(previous, TrialProfile())
            earlier.stop += float(seconds)
            self._changed.add(previous)
            if in_call:  # it ran on this trial's resources, at the start of this call
                profile.others_stop += float(seconds)
            else:  # it ran while the actor was idle between trials: not idle CPU after all
                self._idle = max(self._idle - float(seconds) * earlier.cpus, 0.0)

    def driver_part(self, part: str) -> "_DriverTimer":
        """``with profiler.driver_part("scheduler"): ...`` times the driver's own work
        (:data:`DRIVER_PARTS`); a plain class, cheaper than a generator for thousands of calls."""
        return _DriverTimer(self.driver, part)

    # -- the result ----------------------------------------------------------------------------
    def summary(self, returned_at: float | None = None, store_write_s: float = 0.0) -> dict[str, float]:
        """The sweep's figures (seconds; ``*_cpu_s`` in CPU-seconds), for the store.
        ``store_write_s``: the store's writer thread's time (``Store.write_seconds``)."""
        end = time.monotonic() if returned_at is None else returned_at
        loop_started = self.loop_started if self.loop_started is not None else end
        loop_ended = self.loop_ended if self.loop_ended is not None else end
        return {
            "wall_s": end - self.called_at,
            "cpus": self.total_cpus,
            "engine_start_s": loop_started - self.called_at,
            "ray_start_s": self.ray_start_s,
            "shutdown_s": max(end - loop_ended, 0.0),
            "idle_cpu_s": self._idle,
            **{f"{part}_s": seconds for part, seconds in self.driver.items()},
            "store_s": self.driver["store"] + store_write_s,
        }


class _DriverTimer:
    __slots__ = ("_totals", "_part", "_start")

    def __init__(self, totals: dict[str, float], part: str) -> None:
        self._totals, self._part = totals, part

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        self._totals[self._part] += time.perf_counter() - self._start


def combine(summary: Mapping[str, float], trials: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """The profile table: CPU-seconds per part, summed over trials, and the check against wall time.

    ``summary`` is :meth:`SweepProfiler.summary` (summed over the runs of a resumed sweep);
    ``trials`` maps trial ids to :meth:`TrialProfile.as_row` rows.
    """
    cpus = float(summary.get("cpus") or 1.0)
    ray_start = min(summary.get("ray_start_s", 0.0), summary.get("engine_start_s", 0.0))
    rows: dict[str, float] = {
        "engine start: Ray": ray_start * cpus,
        "engine start: other": (summary.get("engine_start_s", 0.0) - ray_start) * cpus,
    }
    names = {"start": "trial start", "rollout_start": "rollout actors' start", "sampling": "sampling", "learning": "learning",
             "other_training": "other training", "stop": "trial stop", "waiting": "waiting on the controller"}
    for part in TRIAL_PARTS:
        rows[names[part]] = sum(row.get(f"{part}_s", 0.0) * row.get("cpus", 0.0) for row in trials.values())
    rows["idle CPU"] = summary.get("idle_cpu_s", 0.0)
    rows["shutdown"] = summary.get("shutdown_s", 0.0) * cpus
    total = sum(rows.values())
    capacity = summary.get("wall_s", 0.0) * cpus
    return {
        "cpus": cpus,
        "wall_s": summary.get("wall_s", 0.0),
        "rows": rows,
        "total_cpu_s": total,
        "capacity_cpu_s": capacity,
        "driver": {part: summary.get(f"{part}_s", 0.0) for part in DRIVER_PARTS},
        "trials": len(trials),
    }


#: The experiment_state key of the sweep's figures.
STATE_KEY = "profile"


def save_profile(store: Any, experiment_id: int, summary: Mapping[str, float]) -> None:
    """Store a run's :meth:`SweepProfiler.summary`, added to what earlier runs of the sweep stored."""
    merged = dict(summary)
    previous = load_summary(store, experiment_id)
    if previous:
        for key, value in previous.items():
            if key != "cpus" and isinstance(value, (int, float)):
                merged[key] = merged.get(key, 0.0) + value
    store.save_state(experiment_id, STATE_KEY, json.dumps(merged).encode())


def load_summary(store: Any, experiment_id: int) -> dict[str, float] | None:
    blob = store.load_state(experiment_id, STATE_KEY)
    return None if blob is None else json.loads(blob)


def load_profile(store: Any, experiment_id: int) -> dict[str, Any] | None:
    """The profile table of a stored sweep (:func:`combine`), or None if it has none."""
    summary = load_summary(store, experiment_id)
    if summary is None:
        return None
    return combine(summary, store.trial_profiles(experiment_id))
