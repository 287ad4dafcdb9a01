"""The trainers by name (``"PPO"``, ``"A2C"``, ``"IMPALA"``, ``"APPO"``, ``"DQN"``, ``"APEX"``, ``"SAC"``, ``"TD3"``, ``"DDPG"``, ``"ES"``, ``"ARS"``), each imported on first use: a rollout
actor imports ``algorithms`` for its worker class and must not pay for torch, which only learners need."""

from __future__ import annotations

import importlib
from typing import Any

#: The package of each trainer, by the name it is exported under.
TRAINERS = {"A2C": "algorithms.a2c", "PPO": "algorithms.ppo", "DQN": "algorithms.dqn", "SAC": "algorithms.sac", "TD3": "algorithms.td3",
            "DDPG": "algorithms.td3", "IMPALA": "algorithms.impala", "APPO": "algorithms.appo",
            "APEX": "algorithms.apex", "ES": "algorithms.es", "ARS": "algorithms.ars"}


def trainer_class(name: str) -> Any:
    """The trainer class called ``name``; a ValueError lists the names there are."""
    if name not in TRAINERS:
        raise ValueError(f"no trainer named {name!r}; the trainers are {sorted(TRAINERS)}")
    return getattr(importlib.import_module(TRAINERS[name]), name)
