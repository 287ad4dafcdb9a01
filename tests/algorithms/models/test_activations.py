"""The built-in networks' tanh: torch.tanh's values and gradient on every path it takes."""

from __future__ import annotations

import pytest
import torch

from algorithms.models.activations import MIN_NUMPY_ELEMENTS, Tanh, tanh


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
    torch.testing.assert_close(Tanh()(x), torch.tanh(x))
