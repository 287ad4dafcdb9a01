"""Distributed reinforcement-learning trainers, each a ``tune.Trainable`` that owns its rollout actors.

>>> from algorithms import PPO, register_env
"""

from algorithms.ppo import PPO
from algorithms.rollout import register_env

__all__ = ["PPO", "register_env"]
