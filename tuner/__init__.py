"""Hyperparameter tuning for reinforcement learning on Ray.

>>> from tuner import tune
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tuner-rl")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "tune"]
