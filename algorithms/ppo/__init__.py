"""PPO, whole: the trainer and its config (``trainer.py``), the built-in actor-critic
(``model.py``, and ``numpy_policy.py``: its rollout side in numpy), the clipped loss (``loss.py``),
and its two learners behind one interface (``learner.py``): autograd (``torch_learner.py``) and
the hand-derived gradient in numpy (``numpy_learner.py``)."""

from algorithms.ppo.trainer import PPO, PPO_DEFAULTS

__all__ = ["PPO", "PPO_DEFAULTS"]
