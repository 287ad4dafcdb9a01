"""Forward passes of ``nn.Sequential`` MLPs in numpy, from their ``state_dict`` arrays.

What the off-policy trainers' rollout actors run (``algorithms/dqn/trainer.py``, ``algorithms/sac/trainer.py``):
acting needs the forward pass only, and doing it in numpy keeps torch out of the actor's process
(see ``algorithms/ppo/fast/numpy_policy.py`` for why that matters). The layers are found by name: a
``Sequential`` named ``prefix`` whose ``nn.Linear`` layers sit at any indices, activations
between them.

    layers = linear_layers(module.state_dict_arrays, "body")
    h = mlp(obs, layers, "relu")                    # every layer followed by the activation
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

import numpy as np

Layer = tuple[np.ndarray, np.ndarray]


def _elu(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


#: The numpy twins of ``algorithms/models/activations.py``'s, as f(x, out=x), applied in place
#: (that module imports torch, which a rollout actor never does).
ACTIVATIONS: dict[str, Callable[..., np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x, out: np.maximum(x, 0, out=out),
    "elu": _elu,
    "silu": lambda x, out: np.divide(x, 1 + np.exp(-x), out=out),
}



def linear_layers(arrays: Mapping[str, np.ndarray], prefix: str) -> list[Layer]:
    """(weight (out, in), bias) of each linear layer of the Sequential ``prefix``, in order."""
    pattern = re.compile(rf"^{re.escape(prefix)}\.(\d+)\.weight$")
    indices = sorted(int(m.group(1)) for name in arrays if (m := pattern.match(name)))
    return [(arrays[f"{prefix}.{i}.weight"], arrays[f"{prefix}.{i}.bias"]) for i in indices]


def linear(x: np.ndarray, layer: Layer) -> np.ndarray:
    weight, bias = layer
    out = x @ weight.T
    out += bias
    return out


def mlp(x: np.ndarray, layers: list[Layer], activation: str) -> np.ndarray:
    """``x`` through every layer, each followed by ``activation``."""
    act = ACTIVATIONS[activation]
    for layer in layers:
        x = linear(x, layer)
        x = act(x, out=x)
    return x
