"""The evaluation keys of every trainer (RLlib's names): their defaults, checks and meaning.

``evaluation_interval`` N >= 1 plays evaluation episodes after the trainer's first iteration and
then after every N-th (iterations N, 2N, ...): the first result then already holds the
``evaluation/...`` keys, which a scheduler ranking on them needs in every result, and each later
result carries the latest evaluation (RLlib's ``always_attach_evaluation_results``), its
``evaluation/iteration`` saying which iteration it is of. The episodes
(``algorithms/sampling/evaluation.py``) are played with the policy's deterministic actions
(``evaluation_config={"explore": True}`` samples instead), from env seeds no training env ever
gets, and the same seeds at every evaluation of a trial: a change of the metric is the agent's,
not the draw of its episodes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from schedulers.validation import is_int

__all__ = ["EVALUATION_CONFIG_KEYS", "EVALUATION_DEFAULTS", "EvaluationSettings", "check_evaluation"]

EVALUATION_DEFAULTS: dict[str, Any] = {
    "evaluation_interval": None,  # iterations between evaluations; None or 0: no evaluation
    "evaluation_duration": 10,  # episodes (or env steps, per the unit) of one evaluation, all actors together
    "evaluation_duration_unit": "episodes",  # "episodes" | "timesteps"
    # 0: episodes played in the learner's process; N: N evaluation actors, a bundle each in the
    # trial's placement group (num_cpus_per_worker CPUs, as a rollout actor)
    "evaluation_num_workers": 0,
    # what evaluation changes: explore (False: deterministic actions), env_config (e.g. a harder
    # level), num_envs_per_worker (envs each evaluating process steps together; default: at most
    # the training's, at most the episodes it plays)
    "evaluation_config": {},
}

#: The keys ``evaluation_config`` takes.
EVALUATION_CONFIG_KEYS = ("explore", "env_config", "num_envs_per_worker")
UNITS = ("episodes", "timesteps")


def _fail(key: str, message: str, value: Any) -> None:
    raise ValueError(f"config key '{key}': {message}, got {value!r}")


def check_evaluation(c: Mapping[str, Any]) -> None:
    """Check the evaluation keys of the resolved config ``c``: one ValueError naming the first bad key."""
    interval = c["evaluation_interval"]
    if not (interval is None or (is_int(interval) and interval >= 0)):
        _fail("evaluation_interval", "must be None or an int >= 0 (0 or None: no evaluation)", interval)
    duration = c["evaluation_duration"]
    if not (is_int(duration) and duration >= 1):
        _fail("evaluation_duration", "must be an int >= 1 (episodes or env steps, see evaluation_duration_unit)",
              duration)
    if c["evaluation_duration_unit"] not in UNITS:
        _fail("evaluation_duration_unit", f"must be one of {list(UNITS)}", c["evaluation_duration_unit"])
    workers = c["evaluation_num_workers"]
    if not (is_int(workers) and workers >= 0):
        _fail("evaluation_num_workers", "must be an int >= 0 (0: in the learner's process)", workers)
    overrides = c["evaluation_config"]
    if not isinstance(overrides, Mapping):
        _fail("evaluation_config", f"must be a dict with keys among {list(EVALUATION_CONFIG_KEYS)}", overrides)
    for key, value in overrides.items():
        if key not in EVALUATION_CONFIG_KEYS:
            _fail("evaluation_config", f"unknown key {key!r}; allowed keys: {list(EVALUATION_CONFIG_KEYS)}", key)
        if key == "explore" and not isinstance(value, bool):
            _fail("evaluation_config.explore", "must be True or False", value)
        if key == "env_config" and not isinstance(value, Mapping):
            _fail("evaluation_config.env_config", "must be a dict (the env's config while evaluating)", value)
        if key == "num_envs_per_worker" and not (is_int(value) and value >= 1):
            _fail("evaluation_config.num_envs_per_worker", "must be an int >= 1", value)


@dataclasses.dataclass(frozen=True)
class EvaluationSettings:
    """What one evaluation plays, from a checked config."""

    interval: int
    duration: int
    unit: str
    num_workers: int
    explore: bool
    env_config: Mapping[str, Any]
    num_envs: int

    @classmethod
    def of(cls, c: Mapping[str, Any]) -> EvaluationSettings | None:
        """The settings of the resolved config ``c``, or None when it evaluates never."""
        if not c["evaluation_interval"]:
            return None
        overrides = c["evaluation_config"]
        duration, workers = int(c["evaluation_duration"]), int(c["evaluation_num_workers"])
        envs = int(overrides.get("num_envs_per_worker", c["num_envs_per_worker"]))
        if c["evaluation_duration_unit"] == "episodes" and "num_envs_per_worker" not in overrides:
            envs = min(envs, -(-duration // max(workers, 1)))  # no env left without an episode to play
        return cls(interval=int(c["evaluation_interval"]), duration=duration, unit=c["evaluation_duration_unit"],
                   num_workers=workers, explore=bool(overrides.get("explore", False)),
                   env_config=dict(overrides.get("env_config", c["env_config"])), num_envs=envs)

    def due(self, iteration: int, evaluated: bool) -> bool:
        """Whether to evaluate after ``iteration`` (1-based); ``evaluated``: the trainer holds an
        evaluation already (its first iteration evaluates whatever the interval)."""
        return not evaluated or iteration % self.interval == 0
