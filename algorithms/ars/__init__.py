"""ARS: ES's perturbations with Augmented Random Search's update (``trainer.py``)."""

from algorithms.ars.trainer import ARS, ARS_DEFAULTS

__all__ = ["ARS", "ARS_DEFAULTS"]
