"""Distributed reinforcement-learning trainers, each a ``tune.Trainable`` that owns its rollout actors.

>>> from algorithms import DQN, PPO, SAC, register_env

Importing the package registers ``tuner/SlowCartPole-v1`` with gymnasium (``algorithms/shared/envs.py``).
The trainers are imported on first use: a rollout actor imports this package for its worker
class and must not pay for torch, which only learners need.
"""

from typing import Any

from algorithms.shared import envs as _envs
from algorithms.shared.rollout import register_env

_envs.register()

__all__ = ["DQN", "PPO", "SAC", "register_env"]

_TRAINERS = {"PPO": "algorithms.ppo", "DQN": "algorithms.dqn", "SAC": "algorithms.sac"}


def __getattr__(name: str) -> Any:
    if name in _TRAINERS:
        import importlib

        return getattr(importlib.import_module(_TRAINERS[name]), name)
    raise AttributeError(f"module 'algorithms' has no attribute {name!r}")
