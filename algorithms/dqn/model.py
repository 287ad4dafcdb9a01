"""DQN's Q networks in torch, for the learner (and a pack of DQN trials): the built-in MLP with
dueling heads, and a user's module checked against the contract. ``trainer.py`` has the rest of
DQN: the numpy twin the rollout actors run, and the trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from algorithms.data.observations import ObsSpace, batch_of, to_tensors, tree_map

if TYPE_CHECKING:
    import torch

__all__ = ["build_q_module", "make_q_network"]


def make_q_network(obs_dim: int, num_actions: int, hidden_sizes: list[int], activation: str, dueling: bool) -> Any:
    """An MLP ``body`` and a head of ``num_actions`` Q-values; dueling: Q = V + A - mean(A)."""
    from torch import nn

    from algorithms.models.activations import build_mlp

    class QNetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            width = hidden_sizes[-1] if hidden_sizes else obs_dim
            self.body = build_mlp(obs_dim, hidden_sizes, activation)
            self.advantages = nn.Linear(width, num_actions)
            self.value = nn.Linear(width, 1) if dueling else None

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            h = self.body(obs)
            a = self.advantages(h)
            if self.value is None:
                return a
            return self.value(h) + a - a.mean(-1, keepdim=True)

    return QNetwork()


def build_q_module(model: Any, model_config: dict[str, Any], observation_space: Any, action_space: Any) -> Any:
    """The user's module, checked once (before any sampling): ``forward(obs)`` on a batch of
    observations shaped like the space's must return Q-values of shape (batch, actions)."""
    import torch
    from torch import nn

    from algorithms.models.contract import _name

    where = f"config key 'model' ({_name(model)})"
    module = model(observation_space, action_space, dict(model_config))
    if not isinstance(module, nn.Module):
        raise ValueError(f"{where}: model(observation_space, action_space, model_config) must return a "
                         f"torch.nn.Module, got {type(module).__name__}")
    n = int(action_space.n)
    obs = ObsSpace(observation_space).model_input(
        to_tensors(batch_of(observation_space, [observation_space.sample() for _ in range(2)]), "cpu"))
    expected = f"DQN's forward(obs) must return Q-values of shape (batch, {n}), one per action of {action_space}"
    try:
        with torch.no_grad():
            out = module(obs)
    except Exception as exc:
        raise ValueError(f"{where}: forward failed on a batch of 2 observations of shape "
                         f"{tree_map(lambda leaf: tuple(leaf.shape), obs)}: "
                         f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, n) or not out.is_floating_point():
        got = f"a tensor of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"{where}: {expected}; got {got} for a batch of 2")
    return module
