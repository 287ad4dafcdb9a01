"""Networks: the model contract and the built-in networks (``contract.py``), encoders, action
distributions, activations, a module as a policy (``torch_policy.py``) and numpy forward passes
(``numpy_mlp.py``)."""
