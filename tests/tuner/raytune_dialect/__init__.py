"""Scripts written in Ray Tune's dialect: each runs on Ray Tune once its import lines are swapped
(see tests/tuner/test_raytune_dialect.py, which runs them here and checks their results in the store)."""
