"""APPO: IMPALA's actors and V-trace with PPO's clipped surrogate (``trainer.py``)."""

from algorithms.appo.trainer import APPO, APPO_DEFAULTS

__all__ = ["APPO", "APPO_DEFAULTS"]
