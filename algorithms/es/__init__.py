"""ES (OpenAI-ES): antithetic perturbations of a flat policy, played by the rollout actors (``trainer.py``)."""

from algorithms.es.trainer import ES, ES_DEFAULTS

__all__ = ["ES", "ES_DEFAULTS"]
