"""``from tuner.search.optuna import OptunaSearch``, the spelling of Ray Tune's ``ray.tune.search.optuna``."""

from tuner.search.optuna_search import OptunaSearch

__all__ = ["OptunaSearch"]
