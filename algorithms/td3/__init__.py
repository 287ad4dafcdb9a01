"""TD3 (twin critics, delayed actor updates, target policy smoothing) and DDPG as its settings:
the trainers, the deterministic actor in torch and its numpy twin that rollout actors run (``trainer.py``)."""

from algorithms.td3.trainer import DDPG, DDPG_DEFAULTS, TD3, TD3_DEFAULTS

__all__ = ["DDPG", "DDPG_DEFAULTS", "TD3", "TD3_DEFAULTS"]
