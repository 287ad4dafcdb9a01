"""narrow_baddbmm is torch.baddbmm, forward and gradients, for the shapes the policies use."""

from __future__ import annotations

import pytest
import torch

from algorithms.ppo.fast.narrow_matmul import narrow_baddbmm


@pytest.mark.parametrize("outputs", [1, 2, 3, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_output_and_gradients_equal_baddbmm(outputs, dtype):
    generator = torch.Generator().manual_seed(outputs)

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype)

    x0, w0, b0 = draw(2, 37, 16), draw(2, 16, outputs), draw(2, 1, outputs)
    upstream = draw(2, 37, outputs)
    results = []
    for fn in (narrow_baddbmm, torch.baddbmm):
        x, w, b = (t.clone().requires_grad_() for t in (x0, w0, b0))
        out = fn(b, x, w)
        out.backward(upstream)
        results.append((out.detach(), x.grad, w.grad, b.grad))
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for ours, reference in zip(*results):
        assert ours.shape == reference.shape
        torch.testing.assert_close(ours, reference, **tol)


def test_inputs_without_grad_get_none():
    x = torch.randn(2, 5, 4)  # observations: no gradient wanted
    w = torch.randn(2, 4, 2, requires_grad=True)
    b = torch.zeros(2, 1, 2, requires_grad=True)
    narrow_baddbmm(b, x, w).sum().backward()
    assert x.grad is None and w.grad is not None and b.grad is not None
