"""The trainer base (``trainer.py``), the off-policy iteration (``off_policy.py``), the checks of
a trainer's model and learner keys (``learner_config.py``) and a trained agent out of a checkpoint
(``agent.py``): what every algorithm builds on."""
