"""PPO, read top to bottom in four files: the algorithm and its config (``trainer.py``), the
clipped loss (``loss.py``), the learner (``learner.py``: the minibatch SGD, through autograd) and
the built-in actor-critic (``model.py``); sampling is ``algorithms/sampling/``, the advantages
``algorithms/data/gae.py``. ``fast/`` holds the CPU fast paths of the built-in network (rollout
actors acting in numpy, the hand-derived numpy learner), each behind the same interface."""

from algorithms.ppo.trainer import PPO, PPO_DEFAULTS

__all__ = ["PPO", "PPO_DEFAULTS"]
