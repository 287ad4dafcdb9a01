"""The peers of ``benchmarks/slow_sim.py`` (Optuna + SB3, Ray Tune + RLlib) and what the three
systems share: the workload, a light factory of the slow simulator, and the outcome of one sweep."""
