"""Distributed reinforcement-learning trainers, each a ``tune.Trainable`` that owns its rollout actors."""

__all__: list[str] = []
