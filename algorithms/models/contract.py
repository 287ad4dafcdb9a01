"""The model contract: what ``config["model"]`` may be, and the built-in networks in torch.

``config["model"]`` is one of:

* a dict of built-in options: ``hidden_sizes`` (default ``[64, 64]``), ``activation``
  (``"tanh"``, ``"relu"``, ``"elu"``, ``"silu"``), ``shared_layers`` (False: separate policy and
  value networks, as SB3's and CleanRL's PPO; True: one trunk, two heads), ``cnn`` (the CNN of
  image observations, ``algorithms/models/encoders.py``: "auto", "nature" or "small");
* a callable ``model(observation_space, action_space, model_config) -> torch.nn.Module``, with
  ``config["model_config"]`` its third argument (RLlib's ``custom_model``, SB3's policy class).

The module's ``forward(obs)`` returns ``(dist_inputs, value)`` for a batch of observations:
``obs`` is what the observation space describes, batched, as float32 tensors on the learner's
device: for a Box a tensor of shape ``(batch, *observation_space.shape)`` (images as they are,
uint8 values as floats: the observations travel and are stored in the env's dtype, and become
float only here); for a Discrete its one-hot ``(batch, n)``; for a MultiBinary its bits; for a
MultiDiscrete its sub-observations' one-hots, concatenated; for a Dict a dict of those by key
(``obs["image"]``, ``obs["direction"]``); for a Tuple a tuple of them. And

* ``dist_inputs`` of shape ``(batch, k)``: logits for ``Discrete(k)``; the concatenated logits
  of every sub-action for ``MultiDiscrete``; for ``Box`` the Gaussian means then their log-stds
  (``k = 2 * action dims``), as RLlib's default models;
* ``value`` of shape ``(batch,)`` or ``(batch, 1)``: the state value.

The trainer builds the action distribution (``algorithms/models/distributions.py``), the loss and the
optimiser around it; the learner may run it on a GPU, rollout actors on CPU with their own copy.

    import torch
    from torch import nn

    def make_my_model(observation_space, action_space, model_config):
        width = model_config.get("width", 64)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = nn.Sequential(nn.Linear(observation_space.shape[0], width), nn.LayerNorm(width), nn.ReLU())
                self.pi, self.vf = nn.Linear(width, action_space.n), nn.Linear(width, 1)
            def forward(self, obs):
                h = self.trunk(obs)
                return self.pi(h), self.vf(h)
        return Net()

    tune.run("PPO", config={"env": "CartPole-v1", "model": make_my_model, "model_config": {"width": 64}})

For a Dict space ``forward`` gets a dict of tensors (MiniGrid's: ``image`` (batch, 7, 7, 3) with
uint8 values as floats, ``direction`` one-hot (batch, 4)):

    def forward(self, obs):
        image = obs["image"].permute(0, 3, 1, 2) / 255.0
        h = self.trunk(torch.cat([self.conv(image), obs["direction"]], dim=1))
        return self.pi(h), self.vf(h)
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import gymnasium as gym
import torch
from torch import nn

from algorithms.models.activations import build_mlp
from algorithms.models.distributions import ActionDistribution
from algorithms.core.learner_config import MODEL_DEFAULTS
from algorithms.data.observations import ObsSpace, batch_of, flat_input, to_tensors, tree_map

ModelFactory = Callable[[gym.Space, gym.Space, Mapping[str, Any]], nn.Module]


def obs_shape(space: gym.Space) -> tuple[int, ...]:
    """The shape of one observation as a model receives it: the Box's shape, or (n,) one-hot."""
    if isinstance(space, gym.spaces.Discrete):
        return (int(space.n),)
    if space.shape is None:
        raise TypeError(f"observation space {space} has no shape")
    return tuple(int(d) for d in space.shape)


class MLPModel(nn.Module):
    """The built-in network under the contract: an MLP over the flattened observation, policy and
    value either separate (two MLPs) or sharing the hidden layers (one trunk, two heads); a Box's
    log-std is a state-independent parameter. Orthogonal init as SB3 and CleanRL: sqrt(2)
    hidden, 0.01 policy output, 1 value output."""

    def __init__(self, in_dim: int, dist_size: int, hidden_sizes: list[int], activation: str,
                 shared_layers: bool, free_log_std: int = 0) -> None:
        super().__init__()
        self.shared_layers = shared_layers
        self.free_log_std = free_log_std
        self.pi_trunk = build_mlp(in_dim, hidden_sizes, activation)
        self.vf_trunk = None if shared_layers else build_mlp(in_dim, hidden_sizes, activation)
        self.pi_head = nn.Linear(hidden_sizes[-1], dist_size - free_log_std)
        self.vf_head = nn.Linear(hidden_sizes[-1], 1)
        self.log_std = nn.Parameter(torch.zeros(free_log_std)) if free_log_std else None
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.orthogonal_(module.weight, gain=math.sqrt(2))
                nn.init.zeros_(module.bias)
        nn.init.orthogonal_(self.pi_head.weight, gain=0.01)
        nn.init.orthogonal_(self.vf_head.weight, gain=1.0)

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        flat = flat_input(obs)
        h = self.pi_trunk(flat)
        out = self.pi_head(h)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand(len(out), -1)], dim=1)
        value = self.vf_head(h if self.vf_trunk is None else self.vf_trunk(flat))
        return out, value[:, 0]


class EncoderModel(nn.Module):
    """The built-in network for observations with images: the encoder of the space (a CNN per
    image, the rest flattened: ``algorithms/models/encoders.py``), shared by policy and value as
    SB3's ``CnnPolicy``, then :class:`MLPModel` on its features."""

    def __init__(self, observation_space: gym.Space, dist_size: int, hidden_sizes: list[int], activation: str,
                 shared_layers: bool, free_log_std: int = 0, cnn: str = "auto") -> None:
        super().__init__()
        from algorithms.models.encoders import Encoder

        self.encoder = Encoder(observation_space, cnn)
        # Orthogonal with gain sqrt(2), biases zero: SB3's ActorCriticPolicy (ortho_init) and
        # CleanRL's Atari PPO initialise the CNN so; torch's default init learns Atari slower.
        for module in self.encoder.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.orthogonal_(module.weight, gain=math.sqrt(2))
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        self.mlp = MLPModel(self.encoder.features, dist_size, hidden_sizes, activation, shared_layers, free_log_std)

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mlp(self.encoder(obs))


def build_model(model: Mapping[str, Any] | ModelFactory, model_config: Mapping[str, Any],
                observation_space: gym.Space, action_space: gym.Space, dist: ActionDistribution) -> nn.Module:
    """The module ``config["model"]`` describes (see the module docstring); ValueError naming
    ``model`` when a callable returns something else than a ``torch.nn.Module``."""
    if callable(model):
        module = model(observation_space, action_space, dict(model_config))
        if not isinstance(module, nn.Module):
            raise ValueError(f"config key 'model': {_name(model)}(observation_space, action_space, model_config) "
                             f"must return a torch.nn.Module, got {type(module).__name__}")
        return module
    options = {**MODEL_DEFAULTS, **model}
    free_log_std = dist.size // 2 if isinstance(action_space, gym.spaces.Box) else 0
    from algorithms.data.observations import has_image

    if has_image(observation_space):
        return EncoderModel(observation_space, dist.size, [int(s) for s in options["hidden_sizes"]],
                            options["activation"], bool(options["shared_layers"]), free_log_std, options["cnn"])
    return MLPModel(ObsSpace(observation_space).flat_dim, dist.size, [int(s) for s in options["hidden_sizes"]],
                    options["activation"], bool(options["shared_layers"]), free_log_std)


def check_model_outputs(module: nn.Module, observation_space: gym.Space, action_space: gym.Space,
                        dist: ActionDistribution, device: torch.device, model: Any) -> None:
    """Run ``module`` on two observations and raise one ValueError naming ``model`` and the
    expected shapes unless it returns ``(dist_inputs (2, k), value (2,) or (2, 1))``."""
    space = ObsSpace(observation_space)
    obs = space.model_input(to_tensors(batch_of(observation_space, [observation_space.sample() for _ in range(2)]), device))
    shapes = tree_map(lambda leaf: tuple(leaf.shape), obs)
    expected = (f"forward(obs) must return (dist_inputs, value) with dist_inputs of shape (batch, {dist.size}) "
                f"({dist.layout} for {action_space}) and value of shape (batch,) or (batch, 1)")
    where = f"config key 'model' ({_name(model)})"
    try:
        with torch.no_grad():
            out = module(obs)
    except Exception as exc:
        raise ValueError(f"{where}: forward failed on a batch of 2 observations of shape {shapes}: "
                         f"{type(exc).__name__}: {exc}") from exc
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        got = type(out).__name__ if not isinstance(out, (tuple, list)) else f"a {len(out)}-tuple"
        raise ValueError(f"{where}: {expected}; got {got}")
    dist_inputs, value = out
    if tuple(dist_inputs.shape) != (2, dist.size) or tuple(value.shape) not in ((2,), (2, 1)):
        raise ValueError(f"{where}: {expected}; got dist_inputs of shape {tuple(dist_inputs.shape)} and value "
                         f"of shape {tuple(value.shape)} for a batch of 2")
    if not (dist_inputs.is_floating_point() and value.is_floating_point()):
        raise ValueError(f"{where}: {expected}, as floating-point tensors; got {dist_inputs.dtype} and {value.dtype}")


def _name(model: Any) -> str:
    return "the built-in MLP" if not callable(model) else getattr(model, "__qualname__", type(model).__name__)
