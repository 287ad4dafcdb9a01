"""Distributed reinforcement-learning trainers, each a ``tune.Trainable`` that owns its rollout actors.

>>> from algorithms import A2C, APEX, APPO, ARS, DDPG, DQN, ES, IMPALA, PPO, SAC, TD3, register_env

Importing the package registers ``tuner/SlowCartPole-v1`` with gymnasium (``algorithms/envs/builtin.py``).
The trainers are imported on first use: a rollout actor imports this package for its worker
class and must not pay for torch, which only learners need.
"""

from typing import Any

from algorithms.core.names import TRAINERS, trainer_class
from algorithms.envs import builtin as _envs
from algorithms.envs.registry import register_env

_envs.register()

__all__ = ["A2C", "APEX", "APPO", "ARS", "DDPG", "DQN", "ES", "IMPALA", "PPO", "SAC", "TD3", "load_agent", "register_env"]


def load_agent(checkpoint: str, config: dict[str, Any] | None = None) -> Any:
    """The agent a checkpoint of any trainer here (PPO, A2C, IMPALA, APPO, DQN, APEX, SAC, TD3, DDPG, ES, ARS) holds (a folder, or a URI of the sweep's object
    storage, on any machine), restored and ready to act: ``agent.act(observation, explore=False)``;
    ``agent.make_env()`` makes its env. ``config`` overrides the config the checkpoint keeps.

    >>> agent = load_agent("s3://bucket/sweeps/my_sweep/PPO_1a2b3_00000/checkpoint_000010")  # doctest: +SKIP
    """
    from algorithms.core.agent import load_trainer

    return load_trainer(checkpoint, config)


def __getattr__(name: str) -> Any:
    if name in TRAINERS:
        return trainer_class(name)
    raise AttributeError(f"module 'algorithms' has no attribute {name!r}")
