"""``b + x @ w`` for a stacked weight with few output columns, every product in a fast shape.

MKL's single-precision GEMM is slow on some CPUs (benchmarks/RESULTS.md names one) when the
product has only a few columns: ``(512 x 64) @ (64 x 2)`` and the weight gradient
``(64 x 512) @ (512 x 2)`` each cost as much as a whole ``(512 x 64) @ (64 x 64)``, while the
same arithmetic laid out with the few outputs as the product's *rows*, ``(2 x 64) @ (64 x 512)``,
runs several times faster. A policy's output layer (two logits, one value) is that narrow
product, forward and backward. :func:`narrow_baddbmm` computes ``baddbmm(b, x, w)`` transposed
(``(w^T x^T + b^T)^T``) and its gradients as ``g @ w^T`` and ``(g^T x)^T``: the same sums, in
shapes that are fast everywhere.

    >>> import torch
    >>> x = torch.randn(2, 8, 4, requires_grad=True)
    >>> w = torch.randn(2, 4, 3, requires_grad=True)
    >>> b = torch.zeros(2, 1, 3, requires_grad=True)
    >>> out = narrow_baddbmm(b, x, w)
    >>> bool(torch.allclose(out, torch.baddbmm(b, x, w), atol=1e-6))
    True
"""

from __future__ import annotations

from typing import Any

import torch


class _NarrowBaddbmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, b: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.baddbmm(b.transpose(1, 2), w.transpose(1, 2), x.transpose(1, 2)).transpose(1, 2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        need_b, need_x, need_w = ctx.needs_input_grad
        grad_b = grad.sum(1, keepdim=True) if need_b else None
        grad_x = torch.bmm(grad, w.transpose(1, 2)) if need_x else None
        grad_w = torch.bmm(grad.transpose(1, 2), x).transpose(1, 2) if need_w else None
        return grad_b, grad_x, grad_w


def narrow_baddbmm(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``torch.baddbmm(b, x, w)`` for ``x`` (k, n, i), ``w`` (k, i, o) and ``b`` (k, 1, o) with few
    outputs ``o``, differentiable in all three (see the module docstring)."""
    return _NarrowBaddbmm.apply(b, x, w)
