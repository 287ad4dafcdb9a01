"""The peers of ``benchmarks/slow_sim.py`` and ``benchmarks/sweep_race.py`` (Optuna + SB3, Ray Tune +
RLlib) and what the systems share: the PPO objective, the workloads, the outcome of one sweep."""
