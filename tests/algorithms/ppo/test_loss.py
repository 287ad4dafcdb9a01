"""The fused PPO losses give autograd's numbers through the plain ops, ties and clipping included."""

from __future__ import annotations

import pytest
import torch

from algorithms.ppo.loss import ppo_losses


def plain_losses(logp, values, old_logp, adv, target, old_values, clip, vf_clip, vf_coeff):
    """PPO's losses written as plain torch ops (what ppo_losses replaces)."""
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    policy_loss = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    if vf_clip is None:
        vf_loss = 0.5 * torch.nn.functional.mse_loss(values, target)
    else:
        v_clipped = old_values + (values - old_values).clamp(-vf_clip, vf_clip)
        vf_loss = 0.5 * torch.max((values - target).pow(2), (v_clipped - target).pow(2)).mean()
    return policy_loss + vf_coeff * vf_loss, policy_loss, vf_loss, ratio, log_ratio


@pytest.mark.parametrize("vf_clip", [None, 0.2, 10.0], ids=["no-vf-clip", "vf-clip", "vf-clip-never-active"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_losses_and_gradients_equal_autograd_through_the_plain_ops(vf_clip, dtype):
    generator = torch.Generator().manual_seed(0)
    n = 512

    def draw(scale=1.0):
        return (torch.randn(n, generator=generator) * scale).to(dtype)

    old_logp, adv, target, old_values = draw(), draw(), draw(), draw()
    # ratios inside the clip range (ties between the two surrogate terms), outside on both sides
    logp0 = old_logp + draw(0.3)
    logp0[:8] = old_logp[:8]  # ratio exactly 1
    values0 = old_values + draw(0.5)
    values0[:8] = old_values[:8] + 0.2  # at the value clip's edge when vf_clip is 0.2
    outs = []
    for fn in (ppo_losses, None):
        logp, values = logp0.clone().requires_grad_(), values0.clone().requires_grad_()
        if fn is None:
            result = plain_losses(logp, values, old_logp, adv, target, old_values, 0.2, vf_clip, 0.5)
        else:
            result = fn(logp, values, old_logp=old_logp, advantages=adv, targets=target, old_values=old_values,
                        clip=0.2, vf_clip=vf_clip, vf_coeff=0.5)
        (result[0] * 3.0).backward()  # a scaled upstream gradient reaches both inputs
        outs.append((result, logp.grad, values.grad))
    (fused, fused_logp_grad, fused_values_grad), (plain, plain_logp_grad, plain_values_grad) = outs
    tol = {"rtol": 1e-5, "atol": 1e-7} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-14}
    for a, b in zip(fused, plain):
        torch.testing.assert_close(a.detach(), b.detach(), **tol)
    torch.testing.assert_close(fused_logp_grad, plain_logp_grad, **tol)
    torch.testing.assert_close(fused_values_grad, plain_values_grad, **tol)
    assert not fused[1].requires_grad and not fused[3].requires_grad  # the statistics are detached
