"""A2C, the synchronous advantage actor-critic, on the trainers' base policy (``trainer.py``)."""

from algorithms.a2c.trainer import A2C, A2C_DEFAULTS

__all__ = ["A2C", "A2C_DEFAULTS"]
