"""What the optimiser tests share: torch's optimisers with options that give each some state to
keep, and a small network with a LayerNorm among its layers."""

import torch
from torch import nn

OPTIMISERS = [
    (torch.optim.Adam, {"eps": 1e-5}),
    (torch.optim.AdamW, {"weight_decay": 0.1}),
    (torch.optim.RMSprop, {"momentum": 0.9, "centered": True}),
    (torch.optim.SGD, {"momentum": 0.9, "nesterov": True}),
]


def small_net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))
