"""IMPALA: streaming rollout actors and a V-trace-corrected learner (``trainer.py``)."""

from algorithms.impala.trainer import IMPALA, IMPALA_DEFAULTS

__all__ = ["IMPALA", "IMPALA_DEFAULTS"]
