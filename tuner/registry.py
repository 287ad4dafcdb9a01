"""Trainables registered by name, so a spec or ``tune.run("PPO")`` can name them."""

from __future__ import annotations

import importlib
from typing import Any, Callable

_REGISTRY: dict[str, Any] = {}
#: Names that resolve lazily to a "module:attribute" (the algorithms ship here).
_BUILTIN: dict[str, str] = {"PPO": "algorithms.ppo:PPO", "A2C": "algorithms.a2c:A2C", "DQN": "algorithms.dqn:DQN",
                            "SAC": "algorithms.sac:SAC", "TD3": "algorithms.td3:TD3", "DDPG": "algorithms.td3:DDPG",
                            "IMPALA": "algorithms.impala:IMPALA", "APPO": "algorithms.appo:APPO",
                            "APEX": "algorithms.apex:APEX", "ES": "algorithms.es:ES", "ARS": "algorithms.ars:ARS"}


def register_trainable(name: str, trainable: Callable[..., Any] | type) -> None:
    """Make ``trainable`` (a function or Trainable class) available as ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_trainable: name must be a non-empty string, got {name!r}")
    if not callable(trainable):
        raise ValueError(f"register_trainable: trainable {name!r} must be a function or a Trainable class")
    _REGISTRY[name] = trainable


def get_trainable(name: str) -> Any:
    """The trainable registered as ``name``, or imported from a ``module:attribute`` path."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    target = _BUILTIN.get(name, name)
    if ":" in target:
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"trainable {name!r}: cannot import module {module_name!r} ({exc})") from None
        if not hasattr(module, attr):
            raise ValueError(f"trainable {name!r}: module {module_name!r} has no attribute {attr!r}")
        return getattr(module, attr)
    known = sorted(set(_REGISTRY) | set(_BUILTIN))
    raise ValueError(
        f"trainable {name!r} is not registered (registered: {known}); "
        f"pass a function, a Trainable class, or 'module:attribute'"
    )
