"""Q(s, a) critics for the continuous-action trainers (SAC, TD3, DDPG): one or two MLPs on the
observation and the action, concatenated; observations with images go through the space's
encoder first. torch is imported inside: rollout actors import the trainers' modules and never
build a critic."""

from __future__ import annotations

from typing import Any

__all__ = ["build_mlp_lazily", "make_critic"]


def build_mlp_lazily(in_dim: int, hidden_sizes: list[int], activation: str) -> Any:
    """``activations.build_mlp``, imported when called (it imports torch: the learner's side only)."""
    from algorithms.models.activations import build_mlp

    return build_mlp(in_dim, hidden_sizes, activation)


def make_critic(obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str, twin: bool,
                observation_space: Any = None, cnn: str = "auto") -> Any:
    """One or two Q(s, a) MLPs on the observation and the squashed action, concatenated. With an
    ``observation_space`` (one with images), the observation goes through the space's encoder
    first (a CNN per image: ``algorithms/models/encoders.py``), shared by the Q heads, and the
    critic takes observations as ``ObsSpace.model_input`` gives them; else flattened."""
    import torch
    from torch import nn

    from algorithms.models.encoders import Encoder

    class Critic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = Encoder(observation_space, cnn) if observation_space is not None else None
            width = self.encoder.features if self.encoder is not None else obs_dim
            self.qs = nn.ModuleList(
                nn.Sequential(build_mlp_lazily(width + act_dim, hidden_sizes, activation), nn.Linear(hidden_sizes[-1], 1))
                for _ in range(2 if twin else 1))

        def forward(self, obs: Any, actions: torch.Tensor) -> list[torch.Tensor]:
            x = self._input(obs, actions)
            return [q(x)[:, 0] for q in self.qs]

        def first(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
            """The first critic's Q(s, a) alone (TD3's actor loss: the second one's would go unused)."""
            return self.qs[0](self._input(obs, actions))[:, 0]

        def _input(self, obs: Any, actions: torch.Tensor) -> torch.Tensor:
            features = self.encoder(obs) if self.encoder is not None else obs
            return torch.cat([features, actions], dim=-1)

    return Critic()
