"""SAC (twin critics, automatic entropy tuning, squashed Gaussian actions): the trainer, its
networks in torch and the actor's numpy twin that the rollout actors run (``trainer.py``)."""

from algorithms.sac.trainer import SAC, SAC_DEFAULTS

__all__ = ["SAC", "SAC_DEFAULTS"]
