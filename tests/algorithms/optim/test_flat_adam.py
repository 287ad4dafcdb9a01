"""FlatAdam: torch.optim.Adam with global-norm clipping on one flat buffer, in numpy."""

from __future__ import annotations

import numpy as np
import torch

from algorithms.optim.flat_adam import FlatAdam

SHAPES = [(2, 4, 8), (2, 1, 8), (3,)]


def _loss(params: list[torch.Tensor], data: torch.Tensor) -> torch.Tensor:
    return sum((p * (k + 1)).sum() * data.sum() ** 2 for k, p in enumerate(params))


def test_numpy_step_matches_torch_adam_with_clipping():
    """step_flat (numpy, a flat gradient) is torch.optim.Adam + clip_grad_norm_, step for step,
    clipped or not."""
    gen = torch.Generator().manual_seed(1)
    ours = [torch.randn(s, generator=gen, requires_grad=True) for s in SHAPES]
    theirs = [p.detach().clone().requires_grad_(True) for p in ours]
    flat = FlatAdam(ours, lr=3e-3, eps=1e-5)
    reference = torch.optim.Adam(theirs, lr=3e-3, eps=1e-5)
    grad_buffer = np.zeros(flat.flat.numel(), dtype=np.float32)
    views = flat.flat_views(grad_buffer)
    for step in range(6):
        data = torch.randn(8, generator=gen) * (10 if step % 2 else 0.01)  # clipped, then not
        for view, g in zip(views, torch.autograd.grad(_loss(ours, data), ours)):
            view[...] = g.numpy()
        flat.step_flat(grad_buffer, max_grad_norm=0.5)
        reference.zero_grad()
        _loss(theirs, data).backward()
        torch.nn.utils.clip_grad_norm_(theirs, 0.5)
        reference.step()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert flat.steps == 6


def test_state_converts_to_and_from_torch_adam():
    """A FlatAdam state is a torch.optim.Adam state and back (checkpoints of the numpy and the
    torch learner restore into each other)."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=gen, requires_grad=True) for s in SHAPES]
    flat = FlatAdam(params, lr=1e-2, eps=1e-5)
    for _ in range(3):
        flat.step_flat(np.random.default_rng(0).normal(size=flat.flat.numel()).astype(np.float32))
    twins = [p.detach().clone().requires_grad_(True) for p in params]
    reference = torch.optim.Adam(twins, lr=1e-2, eps=1e-5)
    reference.load_state_dict({**reference.state_dict(), "state": flat.torch_adam_state()})
    other = FlatAdam([p.detach().clone() for p in params], lr=1e-2, eps=1e-5)
    other.load_torch_adam_state(reference.state_dict())
    torch.testing.assert_close(other.exp_avg, flat.exp_avg)
    torch.testing.assert_close(other.exp_avg_sq, flat.exp_avg_sq)
    assert other.steps == flat.steps == 3
    # both step on alike from there
    grad = np.random.default_rng(1).normal(size=flat.flat.numel()).astype(np.float32)
    flat.step_flat(grad.copy())
    for twin, g in zip(twins, flat.flat_views(grad)):
        twin.grad = torch.from_numpy(g.copy())
    reference.step()
    for a, b in zip(params, twins):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


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
