"""Distributed reinforcement-learning trainers, each a ``tune.Trainable`` that owns its rollout actors.

>>> from algorithms import PPO, register_env

Importing the package registers ``tuner/SlowCartPole-v1`` with gymnasium (``algorithms/envs.py``).
"""

from algorithms import envs as _envs
from algorithms.ppo import PPO
from algorithms.rollout import register_env

_envs.register()

__all__ = ["PPO", "register_env"]
