"""The activations of the built-in torch networks, with a tanh that is fast on a CPU learner.

torch's CPU ``tanh`` kernel can be several times slower than numpy's vectorised one (on some CPUs
it costs more than the 64x64 matmul next to it: benchmarks/RESULTS.md), and the built-in networks are
tanh MLPs whose learner runs on a CPU by default. :func:`tanh` computes the forward pass with
numpy's ``tanh`` on a CPU float tensor's own memory, and the gradient with torch's
``tanh_backward``; on any other device or dtype, and for tensors too small for the kernel to
outweigh an extra autograd node, it is ``torch.tanh``. Both agree to within a few units in the
last place.

    >>> import torch
    >>> x = torch.linspace(-2, 2, 5, requires_grad=True)
    >>> y = tanh(x)
    >>> y.sum().backward()
    >>> bool(torch.allclose(x.grad, 1 - torch.tanh(x.detach()) ** 2))
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

_NUMPY_DTYPES = (torch.float32, torch.float64)
#: Below this many elements torch's own kernel is the cheaper call (a minibatch of ~100 rows of a
#: 64-wide layer pair).
MIN_NUMPY_ELEMENTS = 16384


class _NumpyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = _numpy_tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


def _numpy_tanh(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=x.dtype)
    np.tanh(x.detach().numpy(), out=y.numpy())
    return y


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``torch.tanh(x)``, computed by numpy for a CPU float32/float64 tensor (see the module)."""
    if x.device.type != "cpu" or x.dtype not in _NUMPY_DTYPES or x.numel() < MIN_NUMPY_ELEMENTS:
        return torch.tanh(x)
    if x.requires_grad and torch.is_grad_enabled():
        return _NumpyTanh.apply(x)
    return _numpy_tanh(x)


#: The built-in networks' activations, by the name of the ``activation`` key (the same names as
#: their numpy twins', ``algorithms/models/numpy_mlp.py``, which the config checks read).
ACTIVATION_FUNCTIONS: dict[str, Any] = {"tanh": tanh, "relu": torch.relu, "elu": nn.functional.elu,
                                        "silu": nn.functional.silu}


class Activation(nn.Module):
    """One of :data:`ACTIVATION_FUNCTIONS` as a layer of an ``nn.Sequential``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.fn = ACTIVATION_FUNCTIONS[name]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.name


def build_mlp(in_dim: int, hidden_sizes: list[int], activation: str) -> nn.Sequential:
    """The built-in networks' hidden layers: a Linear then the activation, per size in ``hidden_sizes``."""
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [nn.Linear(in_dim, size), Activation(activation)]
        in_dim = size
    return nn.Sequential(*layers)
