"""DQN (double Q, dueling heads, n-step returns): the trainer,
its Q-networks in torch and their numpy twin that the rollout actors run (``trainer.py``)."""

from algorithms.dqn.trainer import DQN, DQN_DEFAULTS

__all__ = ["DQN", "DQN_DEFAULTS"]
