"""Distributed reinforcement-learning trainers, each a ``tune.Trainable`` that owns its rollout actors.

>>> from algorithms import PPO, register_env

Importing the package registers ``tuner/SlowCartPole-v1`` with gymnasium (``algorithms/envs.py``).
The trainers are imported on first use: a rollout actor imports this package for its worker
class and must not pay for torch, which only learners need.
"""

from typing import Any

from algorithms import envs as _envs
from algorithms.rollout import register_env

_envs.register()

__all__ = ["PPO", "register_env"]


def __getattr__(name: str) -> Any:
    if name == "PPO":
        from algorithms.ppo import PPO

        return PPO
    raise AttributeError(f"module 'algorithms' has no attribute {name!r}")
