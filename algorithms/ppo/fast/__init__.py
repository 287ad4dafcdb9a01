"""What makes PPO's built-in network fast on a CPU, beside the plain implementation it matches.

For the default network (separate policy and value MLPs, 64 wide) the number of calls is what
an iteration costs, and a numpy call costs a fraction of a torch one. So:

* ``numpy_policy.py``: the network's forward pass and action sampling in numpy, what rollout
  actors run: they never import torch (its import is the largest part of an actor's start);
* ``numpy_learner.py``: the minibatch loss's gradient derived by hand, in numpy, for Discrete
  actions and Adam, behind the learner interface of ``../learner.py`` (``learner="auto"`` picks
  it where it applies; tested equal to autograd);
* ``narrow_matmul.py``: the torch network's few-column output layer in a shape that GEMM
  libraries run fast.

Each is tested equal to the plain path; benchmarks/RESULTS.md has what each pays.
"""
