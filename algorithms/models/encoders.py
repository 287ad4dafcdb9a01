"""Built-in encoders chosen from the observation space: what turns an observation into features.

* a Box of 3 dimensions (an image, height x width x channels or channels first) goes through a
  CNN: the Nature DQN's three convolutions (Mnih et al. 2015; SB3's ``NatureCNN``, CleanRL's) for
  images of at least 36 pixels a side, a small one (three 2x2 convolutions, as the MiniGrid
  baselines use) for smaller ones; uint8 pixels are scaled to [0, 1] first;
* anything else is flattened (a Discrete one-hot, see ``ObsSpace.model_input``);
* a Dict or Tuple gets one encoder per key or item, their features concatenated.

``model={"cnn": "nature" | "small" | "auto"}`` picks the CNN ("auto": by the image's size).

    >>> import gymnasium as gym, numpy as np, torch
    >>> space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "direction": gym.spaces.Discrete(4)})
    >>> encoder = Encoder(space)
    >>> encoder.features  # 512 from the small CNN, 4 from the one-hot direction
    516
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from algorithms.data.observations import ObsSpace, is_image

CNNS = ("auto", "nature", "small")
#: Images at least this many pixels a side get the Nature CNN under cnn="auto" (its 8x8 stride-4
#: first layer and the two after it need 36).
NATURE_MIN_SIDE = 36


def channels_first(space: gym.spaces.Box) -> bool:
    """Whether an image Box is (channels, height, width): its first side is the smallest (SB3's rule)."""
    shape = space.shape
    return bool(shape[0] < shape[1] and shape[0] < shape[2])


class ImageCNN(nn.Module):
    """Convolutions over one image Box, then a linear layer to ``features`` (ReLU throughout)."""

    def __init__(self, space: gym.spaces.Box, cnn: str = "auto", features: int = 512) -> None:
        super().__init__()
        if cnn not in CNNS:
            raise ValueError(f"config key 'model': cnn must be one of {list(CNNS)}, got {cnn!r}")
        self.channels_first = channels_first(space)
        c, h, w = space.shape if self.channels_first else (space.shape[2], space.shape[0], space.shape[1])
        self.scale = 1.0 / 255.0 if space.dtype == np.uint8 else 1.0
        if cnn == "auto":
            cnn = "nature" if min(h, w) >= NATURE_MIN_SIDE else "small"
        if cnn == "nature":
            self.convs = nn.Sequential(nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                                       nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten())
        else:
            self.convs = nn.Sequential(nn.Conv2d(c, 16, 2), nn.ReLU(), nn.Conv2d(16, 32, 2), nn.ReLU(),
                                       nn.Conv2d(32, 64, 2), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, c, h, w)).shape[1])
        self.head = nn.Sequential(nn.Linear(flat, features), nn.ReLU())
        self.features = features

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = image if self.channels_first else image.permute(0, 3, 1, 2)
        return self.head(self.convs(x * self.scale))


class Encoder(nn.Module):
    """Features of a batch of observations as ``ObsSpace.model_input`` gives them: a CNN per
    image, the rest flattened, concatenated in the space's order; :attr:`features` wide."""

    def __init__(self, space: gym.Space, cnn: str = "auto") -> None:
        super().__init__()
        self.obs = ObsSpace(space)
        self.space = space
        self.cnns = nn.ModuleDict()
        features = 0
        for path, leaf in _leaves(space, ""):
            if isinstance(leaf, gym.spaces.Box) and is_image(leaf):
                cnn_module = ImageCNN(leaf, cnn)
                self.cnns[path] = cnn_module
                features += cnn_module.features
            else:
                features += ObsSpace(leaf).flat_dim
        self.features = features

    def forward(self, obs: Any) -> torch.Tensor:
        parts = [self.cnns[path](leaf) if path in self.cnns else leaf.reshape(leaf.shape[0], -1)
                 for path, leaf in _input_leaves(self.space, obs, "")]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _key(path: str, key: Any) -> str:
    # ModuleDict keys cannot hold "."; a path names a leaf of the space's tree
    return f"{path}/{key}" if path else f"leaf_{key}"


def _leaves(space: gym.Space, path: str) -> list[tuple[str, gym.Space]]:
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in _leaves(sub, _key(path, key))]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in _leaves(sub, _key(path, i))]
    return [(path or "leaf", space)]


def _input_leaves(space: gym.Space, obs: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in _input_leaves(sub, obs[key], _key(path, key))]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in _input_leaves(sub, obs[i], _key(path, i))]
    return [(path or "leaf", obs)]
