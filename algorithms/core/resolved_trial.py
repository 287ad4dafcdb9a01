"""A trial's config as the driver resolves it, and the questions asked of resolved configs.

``DistributedTrainer.prepare_trial`` resolves a trial's config once in the driver (defaults,
checks, the sampling layout, the env's creator and spaces) into a :class:`ResolvedTrial` that
travels to the trial's actor; the helpers here answer what the trainer asks of such configs:
the env's spaces (cached per env and config), the bundles evaluation actors take, whether an
evaluation env fits the policy, whether two configs or values differ.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Mapping

from algorithms.envs.registry import EnvCreator, env_spaces, lookup_env_creator, trial_env

__all__ = ["ResolvedTrial", "check_evaluation_env", "differs", "env_spaces_of", "evaluation_bundles", "same_config"]


@dataclasses.dataclass(frozen=True)
class ResolvedTrial:
    """A trial's config as the driver resolved it (``DistributedTrainer.prepare_trial``), carried
    to the trial's actor with the trial: the config it was given, the full config (defaults, the
    sampling layout), the env (a gymnasium id, the creator registered under its name, or the
    creator ``preprocessing`` made) and its spaces (checked: a space no trainer takes fails here)."""

    given: Mapping[str, Any]
    config: dict[str, Any]
    env: str | EnvCreator
    observation_space: Any
    action_space: Any


#: The spaces of the envs this process resolved, by env, env_config and preprocessing: the driver
#: resolves each trial's config more than once, and a sweep's trials mostly share their env.
_env_spaces: dict[tuple[Any, ...], tuple[Any, Any]] = {}


def env_spaces_of(config: Mapping[str, Any], env: str | EnvCreator) -> tuple[Any, Any]:
    """The single-env (observation, action) spaces of the resolved ``env``, from one env built here."""
    given = config["env"]
    registered = lookup_env_creator(given) if isinstance(given, str) else None
    key = (given, registered, repr(config["preprocessing"]),
           repr(sorted((str(k), repr(v)) for k, v in dict(config["env_config"]).items())))
    try:
        cached = _env_spaces.get(key)
    except TypeError:  # an unhashable creator: not cached
        return env_spaces(env, config["env_config"])
    if cached is None:
        cached = _env_spaces[key] = env_spaces(env, config["env_config"])
    # copies: a space carries its own sampling generator, which trainers must not share
    return copy.deepcopy(cached)


def evaluation_bundles(c: Mapping[str, Any]) -> int:
    """Bundles of the trial's group that evaluation actors take (after the rollout actors')."""
    return int(c["evaluation_num_workers"]) if c["evaluation_interval"] and c["num_cpus_per_worker"] > 0 else 0


def check_evaluation_env(c: Mapping[str, Any], spaces: tuple[Any, Any]) -> None:
    """An ``evaluation_config`` env config must give the spaces the policy was built for."""
    if not c["evaluation_interval"] or "env_config" not in c["evaluation_config"]:
        return
    env_config = c["evaluation_config"]["env_config"]
    env = trial_env(c["env"], env_config, c["preprocessing"])
    if env_spaces_of({**c, "env_config": env_config}, env) != spaces:
        raise ValueError("config key 'evaluation_config.env_config': the env it makes has other observation or "
                         "action spaces than the training env's; the policy could not act in it")


def differs(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) != list(b)
    try:
        return bool(a != b)
    except Exception:  # noqa: BLE001
        return a is not b


def same_config(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two configs are equal (False where their values cannot be compared, arrays say)."""
    try:
        return bool(dict(a) == dict(b))
    except Exception:  # noqa: BLE001 - an ambiguous comparison counts as different
        return False
