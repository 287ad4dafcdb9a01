"""Users' PPO modules (the model contract) for packed-trial tests: ones that stack under
``torch.func.vmap`` and one that does not."""

from __future__ import annotations

from torch import nn


def norm_model(observation_space, action_space, model_config):
    """A trunk with LayerNorm and ReLU, policy and value heads: stacks."""
    width = model_config.get("width", 16)

    class NormModel(nn.Module):  # a class per call, as a factory in a user's script makes it
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(observation_space.shape[0], width), nn.LayerNorm(width), nn.ReLU())
            self.pi, self.vf = nn.Linear(width, action_space.n), nn.Linear(width, 1)

        def forward(self, obs):
            h = self.trunk(obs)
            return self.pi(h), self.vf(h)

    return NormModel()


def batchnorm_model(observation_space, action_space, model_config):
    """BatchNorm's running statistics: buffers each member keeps its own of; stacks."""

    class BatchNormModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(observation_space.shape[0], 8), nn.BatchNorm1d(8), nn.Tanh())
            self.heads = nn.Linear(8, action_space.n + 1)

        def forward(self, obs):
            out = self.heads(self.trunk(obs))
            return out[:, :-1], out[:, -1]

    return BatchNormModel()


def branching_model(observation_space, action_space, model_config):
    """Scales large observations down with a Python branch on their values: does not stack (vmap
    cannot branch per member), runs unpacked."""

    class BranchingModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(observation_space.shape[0], action_space.n + 1)

        def forward(self, obs):
            if obs.abs().max() > 100:
                obs = obs / 100
            out = self.body(obs)
            return out[:, :-1], out[:, -1]

    return BranchingModel()


def wrong_width_model(observation_space, action_space, model_config):
    """Logits one wider than the actions: refused by name."""
    return _Heads(observation_space.shape[0], action_space.n + 1)


class _Heads(nn.Module):
    def __init__(self, n_in: int, n_logits: int):
        super().__init__()
        self.pi, self.vf = nn.Linear(n_in, n_logits), nn.Linear(n_in, 1)

    def forward(self, obs):
        return self.pi(obs), self.vf(obs)


__all__ = ["batchnorm_model", "branching_model", "norm_model", "wrong_width_model"]
