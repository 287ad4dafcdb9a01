"""Optimisation: parameters in one flat buffer (``flat_params.py``), Adam on it (``flat_adam.py``) and
the optimiser step a learner takes (``optimizer_step.py``)."""
