"""The built-in networks' activations: one table in torch, its numpy twins the same, and the tanh
that is fast on a CPU: torch.tanh's values and gradient on every path it takes."""

from __future__ import annotations

import pytest
import torch

import numpy as np

from algorithms.core.learner_config import ACTIVATION_NAMES
from algorithms.models.activations import ACTIVATION_FUNCTIONS, MIN_NUMPY_ELEMENTS, Activation, tanh
from algorithms.models.numpy_mlp import ACTIVATIONS


@pytest.mark.parametrize("shape", [(2, 512, 64), (3, 7)], ids=["numpy-kernel", "small"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_tanh_matches_torch_tanh_in_value_and_gradient(shape, dtype):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    grad = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    ours, reference = x.clone().requires_grad_(), x.clone().requires_grad_()
    y = tanh(ours)
    y.backward(grad)
    torch.tanh(reference).backward(grad)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(y.detach(), torch.tanh(x), **tol)
    torch.testing.assert_close(ours.grad, reference.grad, **tol)
    assert y.dtype == dtype and y.shape == x.shape


def test_tanh_of_a_strided_view_without_grad_and_as_a_module():
    x = torch.randn(64, 2 * MIN_NUMPY_ELEMENTS // 64)[:, ::2]  # not contiguous, numpy's path by size
    assert not x.is_contiguous() and x.numel() >= MIN_NUMPY_ELEMENTS
    with torch.no_grad():
        torch.testing.assert_close(tanh(x), torch.tanh(x))
    torch.testing.assert_close(Activation("tanh")(x), torch.tanh(x))


@pytest.mark.parametrize("name", ACTIVATION_NAMES)
def test_every_activation_the_config_takes_is_the_same_in_torch_and_in_numpy(name):
    assert sorted(ACTIVATION_FUNCTIONS) == sorted(ACTIVATIONS) == list(ACTIVATION_NAMES)
    x = torch.linspace(-3, 3, 61, dtype=torch.float64)
    in_numpy = x.numpy().copy()
    np.testing.assert_allclose(ACTIVATIONS[name](in_numpy, out=in_numpy), Activation(name)(x).numpy(), rtol=1e-12,
                               atol=1e-12)
