"""SAC's actor in torch, for the learner (and a pack of SAC trials): the built-in tanh-squashed
Gaussian MLP, a user's module as the actor, and the squashed sample with its log-density.
``trainer.py`` has the rest of SAC: the actor's numpy twin the rollout actors run, and the trainer;
the critics are ``algorithms/models/q_critics.py``'s."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.models.box_actor import checked_module, first_output
from algorithms.models.q_critics import build_mlp_lazily as _mlp

if TYPE_CHECKING:
    import torch

__all__ = ["LOG_STD_MAX", "LOG_STD_MIN", "make_actor", "make_module_actor", "squashed_sample"]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def make_actor(obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str) -> Any:
    """``body`` MLP, then ``mean`` and ``log_std`` heads of the pre-squash Gaussian."""
    from torch import nn

    class Actor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _mlp(obs_dim, hidden_sizes, activation)
            self.mean = nn.Linear(hidden_sizes[-1], act_dim)
            self.log_std = nn.Linear(hidden_sizes[-1], act_dim)

        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.body(obs)
            return self.mean(h), self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    return Actor()


def squashed_sample(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tanh(u), log pi(tanh(u))) for ``u = mean + std * noise``: the Gaussian's log-density
    minus the tanh's log-Jacobian, ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``."""
    import torch

    u = mean + log_std.exp() * noise
    logp = (-0.5 * noise.pow(2) - log_std - _LOG_SQRT_2PI).sum(-1)
    logp = logp - (2 * (math.log(2) - u - torch.nn.functional.softplus(-2 * u))).sum(-1)
    return torch.tanh(u), logp


def make_module_actor(model: Any, model_config: dict[str, Any], observation_space: Any, action_space: Any) -> Any:
    """The user's module as SAC's actor, checked once (before any sampling). PPO's contract for a
    Box: ``forward(obs)`` returns ``dist_inputs`` of shape (batch, 2 x action dims), the means
    then the log stds (or ``(dist_inputs, value)``, the value unused), on observations shaped as
    the space's; here they are the pre-squash Gaussian's. The critics stay built-in MLPs."""
    from torch import nn

    act_dim = int(np.prod(action_space.shape))
    module = checked_module(
        model, model_config, observation_space, action_space, 2 * act_dim,
        f"SAC's forward(obs) must return dist_inputs of shape (batch, {2 * act_dim}): the means, then the "
        f"log stds, of the {act_dim} actions of {action_space} (or a (dist_inputs, value) pair)")

    class ModuleActor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = module

        def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            """``obs``: the model's input (``ObsSpace.model_input``)."""
            dist_inputs = first_output(self.module(obs))
            return dist_inputs[:, :act_dim], dist_inputs[:, act_dim:].clamp(LOG_STD_MIN, LOG_STD_MAX)

    return ModuleActor()
