"""Adam for a population: every member's row of a flat ``[P, D]`` parameter buffer stepped at
once, each with its own learning rate, gradient-norm clip, moments and step count (as
``torch.optim.Adam`` after ``clip_grad_norm_`` on each member alone).

The moments live on the population's device (a pack on a GPU keeps its whole state there); a
step takes the parameters and gradients as torch tensors on that device, or, on the CPU, as
numpy arrays (numpy's memory is shared, not copied: the numpy PPO learner's buffers step in place).

    adam = PopulationAdam(P, D)
    adam.step(flat, grad, lr=lrs[:, None], max_grad_norm=clips[:, None])   # flat -= ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

BETAS, EPS = (0.9, 0.999), 1e-5  # the trainers' default optimizer_config

__all__ = ["PopulationAdam"]


class PopulationAdam:
    """Per-member Adam moments ``[P, D]`` and step counts ``[P, 1]`` on ``device`` (see the
    module docstring)."""

    def __init__(self, members: int, size: int, device: str = "cpu") -> None:
        import torch

        self.device = torch.device(device)
        self.exp_avg = torch.zeros((members, size), device=self.device)
        self.exp_avg_sq = torch.zeros((members, size), device=self.device)
        self.steps = torch.zeros((members, 1), dtype=torch.float64, device=self.device)

    def _tensor(self, value: Any) -> torch.Tensor:
        import torch

        return torch.as_tensor(value, device=self.device)

    def step(self, flat: Any, grad: Any, lr: Any, max_grad_norm: Any) -> None:
        """One step of every member: ``grad`` (changed: clipped in place) to each row's global
        norm ``max_grad_norm`` ``[P, 1]`` (inf: no clip), then Adam with ``lr`` ``[P, 1]`` on
        ``flat`` (in place)."""
        import torch

        flat, g = self._tensor(flat), self._tensor(grad)
        lr, max_grad_norm = self._tensor(lr), self._tensor(max_grad_norm)
        norm = torch.linalg.vector_norm(g, dim=1, keepdim=True)
        g.mul_(torch.clamp(max_grad_norm.to(g.dtype) / (norm + 1e-6), max=1.0))
        self.steps += 1
        b1, b2 = BETAS
        self.exp_avg.mul_(b1).add_(g, alpha=1 - b1)
        self.exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
        step_size = (lr.double() / (1 - b1 ** self.steps)).float()
        denom = (self.exp_avg_sq / (1 - b2 ** self.steps).float()).sqrt_().add_(EPS)
        flat.sub_(step_size * self.exp_avg / denom)

    def reset(self, m: int) -> None:
        """Member ``m`` starts without moments (a new member in its slot)."""
        self.exp_avg[m], self.exp_avg_sq[m], self.steps[m] = 0.0, 0.0, 0.0

    def rows(self, members: Sequence[int]) -> PopulationAdam:
        """The state of ``members`` (copies), as an optimiser of their own."""
        sub = object.__new__(PopulationAdam)
        idx = list(members)
        sub.device = self.device
        sub.exp_avg, sub.exp_avg_sq, sub.steps = self.exp_avg[idx], self.exp_avg_sq[idx], self.steps[idx]
        return sub

    def put_rows(self, members: Sequence[int], sub: PopulationAdam) -> None:
        idx = list(members)
        self.exp_avg[idx], self.exp_avg_sq[idx], self.steps[idx] = sub.exp_avg, sub.exp_avg_sq, sub.steps

    def member_state(self, m: int) -> dict[str, Any]:
        """Member ``m``'s moments (numpy copies) and step count."""
        return {"exp_avg": self.exp_avg[m].cpu().numpy().copy(), "exp_avg_sq": self.exp_avg_sq[m].cpu().numpy().copy(),
                "adam_steps": float(self.steps[m, 0])}

    def load_member_state(self, m: int, state: Mapping[str, Any]) -> None:
        self.exp_avg[m], self.exp_avg_sq[m] = self._tensor(state["exp_avg"]), self._tensor(state["exp_avg_sq"])
        self.steps[m, 0] = float(state["adam_steps"])

    def torch_state(self, m: int, slices: Sequence[tuple[str, int, tuple[int, ...]]]) -> dict[int, dict[str, Any]]:
        """Member ``m``'s state as ``torch.optim.Adam``'s ``state_dict()["state"]`` over parameters
        laid out as ``slices`` (``(name, offset, shape)``, in the optimiser's order), on the CPU;
        empty before its first step, as torch's."""
        import torch

        steps = float(self.steps[m, 0])
        if not steps:
            return {}

        def part(buffer: torch.Tensor, offset: int, shape: tuple[int, ...]) -> torch.Tensor:
            return buffer[m, offset:offset + int(np.prod(shape))].reshape(shape).detach().cpu().clone()

        return {i: {"step": torch.tensor(steps), "exp_avg": part(self.exp_avg, offset, shape),
                    "exp_avg_sq": part(self.exp_avg_sq, offset, shape)}
                for i, (_, offset, shape) in enumerate(slices)}

    def load_torch_state(self, m: int, state: Mapping[int, Mapping[str, Any]],
                         slices: Sequence[tuple[str, int, tuple[int, ...]]]) -> None:
        """Member ``m`` takes ``torch.optim.Adam``'s per-parameter state (of :meth:`torch_state`,
        or a trainer's checkpoint); a parameter without state starts without moments."""
        for i, (_, offset, shape) in enumerate(slices):
            row = slice(offset, offset + int(np.prod(shape)))
            entry = state.get(i)
            self.exp_avg[m, row] = 0.0 if entry is None else self._tensor(entry["exp_avg"]).reshape(-1)
            self.exp_avg_sq[m, row] = 0.0 if entry is None else self._tensor(entry["exp_avg_sq"]).reshape(-1)
        first = state.get(0)
        self.steps[m, 0] = 0.0 if first is None else float(first["step"])
