"""FlatAdam: torch.optim.Adam with global-norm clipping on one flat buffer, in torch and in numpy."""

from __future__ import annotations

import numpy as np
import torch

from algorithms.flat_adam import FlatAdam

SHAPES = [(2, 4, 8), (2, 1, 8), (3,)]


def _loss(params: list[torch.Tensor], data: torch.Tensor) -> torch.Tensor:
    return sum((p * (k + 1)).sum() * data.sum() ** 2 for k, p in enumerate(params))


def test_flat_adam_matches_torch_adam_with_clipping():
    """FlatAdam is torch.optim.Adam (+ clip_grad_norm_) on a flat buffer, step for step."""
    gen = torch.Generator().manual_seed(0)
    ours = [torch.randn(s, generator=gen, requires_grad=True) for s in SHAPES]
    theirs = [p.detach().clone().requires_grad_(True) for p in ours]
    flat = FlatAdam(ours, lr=1e-2, eps=1e-5)
    reference = torch.optim.Adam(theirs, lr=1e-2, eps=1e-5)
    for _ in range(5):
        data = torch.randn(8, generator=gen)
        flat.step(torch.autograd.grad(_loss(ours, data), ours), max_grad_norm=0.5)
        reference.zero_grad()
        _loss(theirs, data).backward()
        torch.nn.utils.clip_grad_norm_(theirs, 0.5)
        reference.step()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b)
    # a torch.optim.Adam state (checkpoints written before FlatAdam) is adopted as it is
    other = FlatAdam([p.detach().clone() for p in theirs], lr=1e-2, eps=1e-5)
    other.load_torch_adam_state(reference.state_dict())
    torch.testing.assert_close(other.exp_avg_sq, flat.exp_avg_sq)
    assert other.steps == flat.steps == 5


def test_numpy_step_equals_torch_step():
    """step_flat (numpy, a flat gradient) takes FlatAdam.step's steps, clipped or not."""
    gen = torch.Generator().manual_seed(1)
    a = [torch.randn(s, generator=gen, requires_grad=True) for s in SHAPES]
    b = [p.detach().clone().requires_grad_(True) for p in a]
    adam_torch, adam_numpy = FlatAdam(a, lr=3e-3, eps=1e-5), FlatAdam(b, lr=3e-3, eps=1e-5)
    grad_buffer = np.zeros(adam_numpy.flat.numel(), dtype=np.float32)
    views = adam_numpy.flat_views(grad_buffer)
    for step in range(6):
        data = torch.randn(8, generator=gen) * (10 if step % 2 else 0.01)  # clipped, then not
        grads = torch.autograd.grad(_loss(a, data), a)
        adam_torch.step(grads, max_grad_norm=0.5)
        for view, g in zip(views, torch.autograd.grad(_loss(b, data), b)):
            view[...] = g.numpy()
        adam_numpy.step_flat(grad_buffer, max_grad_norm=0.5)
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert adam_numpy.steps == 6
    torch.testing.assert_close(adam_numpy.exp_avg, adam_torch.exp_avg)


def test_flat_views_follow_parameter_order_and_shapes():
    params = [torch.zeros(s) for s in SHAPES]
    adam = FlatAdam(params, lr=1e-3)
    buffer = np.arange(adam.flat.numel(), dtype=np.float32)
    views = adam.flat_views(buffer)
    assert [v.shape for v in views] == SHAPES
    assert views[1].reshape(-1)[0] == 2 * 4 * 8 and np.shares_memory(views[2], buffer)
    # the parameters themselves are views of the flat buffer
    adam.flat[:] = torch.from_numpy(buffer)
    assert float(params[2][0]) == 2 * 4 * 8 + 2 * 8
