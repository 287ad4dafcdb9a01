"""PPO's clipped surrogate and value loss as one autograd node, for the torch learner.

Written as torch ops, the two losses are about fifteen small ops forward and twenty backward,
each a dispatch whose fixed cost is most of its time at a minibatch of a few hundred rows.
Their gradient with respect to the log-probabilities and the values is short and known, so
:func:`ppo_losses` computes it in the forward pass and hands it back in ``backward``: the same
numbers as autograd through the plain ops (ties split as ``torch.minimum``/``torch.maximum``
split them), in two graph nodes. The model, the action distribution and an entropy bonus stay
ordinary autograd, so this holds for every model and action space.

    >>> import torch
    >>> logp = torch.tensor([-0.5, -1.0], requires_grad=True)
    >>> values = torch.tensor([0.2, 0.4], requires_grad=True)
    >>> z = torch.zeros(2)
    >>> loss, policy_loss, vf_loss, ratio, log_ratio = ppo_losses(
    ...     logp, values, old_logp=torch.tensor([-0.6, -1.0]), advantages=torch.tensor([1.0, -1.0]),
    ...     targets=torch.tensor([0.0, 1.0]), old_values=z, clip=0.2, vf_clip=None, vf_coeff=0.5)
    >>> loss.backward()
"""

from __future__ import annotations

from typing import Any

import torch


class _PPOLosses(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logp: torch.Tensor, values: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                targets: torch.Tensor, old_values: torch.Tensor, clip: float, vf_clip: float | None,
                vf_coeff: float) -> tuple[torch.Tensor, ...]:
        n = logp.numel()
        log_ratio = logp.detach() - old_logp
        ratio = log_ratio.exp()
        unclipped = advantages * ratio
        clipped = advantages * ratio.clamp(1 - clip, 1 + clip)
        policy_loss = torch.minimum(unclipped, clipped).mean().neg_()
        # d policy_loss / d logp: -A r / n where the unclipped term is the smaller (a tie, i.e.
        # r inside the clip range, passes it whole: half through each term, as autograd does)
        grad_logp = torch.where(unclipped <= clipped, unclipped, 0.0).mul_(-1.0 / n)
        v = values.detach()
        error = v - targets
        if vf_clip is None:
            vf_loss = error.dot(error).mul_(0.5 / n)
            grad_values = error.mul_(vf_coeff / n)
        else:  # 0.5 max((v - R)^2, (v_clipped - R)^2), v_clipped = v_old + clamp(v - v_old)
            delta = v - old_values
            error_clipped = old_values + delta.clamp(-vf_clip, vf_clip) - targets
            plain, clipped_sq = error.square(), error_clipped.square()
            vf_loss = 0.5 * torch.maximum(plain, clipped_sq).mean()
            inside = (delta >= -vf_clip) & (delta <= vf_clip)
            through_clipped = torch.where(inside, error_clipped, 0.0)
            grad_values = torch.where(plain > clipped_sq, error,
                                      torch.where(plain < clipped_sq, through_clipped, 0.5 * (error + through_clipped)))
            grad_values = grad_values.mul_(vf_coeff / n)
        ctx.save_for_backward(grad_logp, grad_values)
        ctx.mark_non_differentiable(policy_loss, vf_loss, ratio, log_ratio)
        return torch.add(policy_loss, vf_loss, alpha=vf_coeff), policy_loss, vf_loss, ratio, log_ratio

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor, *unused: Any) -> tuple[torch.Tensor | None, ...]:
        grad_logp, grad_values = ctx.saved_tensors
        return grad_logp * grad_loss, grad_values * grad_loss, None, None, None, None, None, None, None


def ppo_losses(
    logp: torch.Tensor, values: torch.Tensor, *, old_logp: torch.Tensor, advantages: torch.Tensor,
    targets: torch.Tensor, old_values: torch.Tensor, clip: float, vf_clip: float | None, vf_coeff: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(``policy_loss + vf_coeff * vf_loss``, differentiable in ``logp`` and ``values``; then,
    detached, the clipped surrogate ``-mean(min(A r, A clip(r, 1 - clip, 1 + clip)))``, the value
    loss ``0.5 mean((V - R)^2)`` (with ``vf_clip``, the pessimistic max with V clipped around its
    sampling-time value: CleanRL's clip_vloss), the ratio ``r`` and its log)."""
    return _PPOLosses.apply(logp, values, old_logp, advantages, targets, old_values, clip, vf_clip, vf_coeff)
