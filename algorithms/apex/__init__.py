"""Ape-X DQN: DQN with streaming actors on an epsilon ladder and their own first priorities (``trainer.py``)."""

from algorithms.apex.trainer import APEX, APEX_DEFAULTS

__all__ = ["APEX", "APEX_DEFAULTS"]
