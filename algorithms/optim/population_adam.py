"""Adam for a population: every member's row of a flat ``[P, D]`` parameter buffer stepped at
once, each with its own learning rate, gradient-norm clip, moments and step count (as
``torch.optim.Adam`` after ``clip_grad_norm_`` on each member alone), in numpy.

    adam = PopulationAdam(P, D)
    adam.step(flat, grad, lr=lrs[:, None], max_grad_norm=clips[:, None])   # flat -= ...
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

F32 = np.float32
BETAS, EPS = (0.9, 0.999), 1e-5  # the trainers' default optimizer_config

__all__ = ["PopulationAdam"]


class PopulationAdam:
    """Per-member Adam moments ``[P, D]`` and step counts ``[P, 1]`` (see the module docstring)."""

    def __init__(self, members: int, size: int) -> None:
        self.exp_avg = np.zeros((members, size), dtype=F32)
        self.exp_avg_sq = np.zeros((members, size), dtype=F32)
        self.steps = np.zeros((members, 1))

    def step(self, flat: np.ndarray, grad: np.ndarray, lr: np.ndarray, max_grad_norm: np.ndarray,
             active: np.ndarray | None = None) -> None:
        """One step of every member (of the rows where ``active`` ``[P]`` is True, when given):
        ``grad`` (changed: clipped in place) to each row's global norm ``max_grad_norm`` ``[P, 1]``
        (inf: no clip), then Adam with ``lr`` ``[P, 1]`` on ``flat``."""
        if active is not None and not active.all():
            rows = [int(i) for i in np.flatnonzero(active)]
            sub = self.rows(rows)
            sub_flat, sub_grad = flat[rows], grad[rows]
            sub.step(sub_flat, sub_grad, lr[rows], max_grad_norm[rows])
            flat[rows], grad[rows] = sub_flat, sub_grad
            self.put_rows(rows, sub)
            return
        g = grad
        norm = np.sqrt(np.einsum("pd,pd->p", g, g))[:, None]
        g *= np.minimum(max_grad_norm / (norm + 1e-6), 1.0).astype(F32)
        self.steps += 1
        b1, b2 = BETAS
        self.exp_avg *= F32(b1)
        self.exp_avg += F32(1 - b1) * g
        self.exp_avg_sq *= F32(b2)
        self.exp_avg_sq += F32(1 - b2) * g * g
        step_size = (lr / (1 - b1 ** self.steps)).astype(F32)
        denom = np.sqrt(self.exp_avg_sq / (1 - b2 ** self.steps).astype(F32)) + F32(EPS)
        flat -= step_size * self.exp_avg / denom

    def reset(self, m: int) -> None:
        """Member ``m`` starts without moments (a new member in its slot)."""
        self.exp_avg[m], self.exp_avg_sq[m], self.steps[m] = 0.0, 0.0, 0.0

    def rows(self, members: Sequence[int]) -> PopulationAdam:
        """The state of ``members`` (copies), as an optimiser of their own."""
        sub = object.__new__(PopulationAdam)
        idx = list(members)
        sub.exp_avg, sub.exp_avg_sq, sub.steps = self.exp_avg[idx], self.exp_avg_sq[idx], self.steps[idx]
        return sub

    def put_rows(self, members: Sequence[int], sub: PopulationAdam) -> None:
        idx = list(members)
        self.exp_avg[idx], self.exp_avg_sq[idx], self.steps[idx] = sub.exp_avg, sub.exp_avg_sq, sub.steps

    def member_state(self, m: int) -> dict[str, Any]:
        """Member ``m``'s moments and step count (copies)."""
        return {"exp_avg": self.exp_avg[m].copy(), "exp_avg_sq": self.exp_avg_sq[m].copy(),
                "adam_steps": float(self.steps[m, 0])}

    def load_member_state(self, m: int, state: Mapping[str, Any]) -> None:
        self.exp_avg[m], self.exp_avg_sq[m] = state["exp_avg"], state["exp_avg_sq"]
        self.steps[m, 0] = state["adam_steps"]

    def torch_state(self, m: int, slices: Sequence[tuple[str, int, tuple[int, ...]]]) -> dict[int, dict[str, Any]]:
        """Member ``m``'s state as ``torch.optim.Adam``'s ``state_dict()["state"]`` over parameters
        laid out as ``slices`` (``(name, offset, shape)``, in the optimiser's order); empty before
        its first step, as torch's."""
        import torch

        steps = float(self.steps[m, 0])
        if not steps:
            return {}

        def part(buffer: np.ndarray, offset: int, shape: tuple[int, ...]) -> torch.Tensor:
            return torch.from_numpy(buffer[m, offset:offset + int(np.prod(shape))].reshape(shape).copy())

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
            self.exp_avg[m, row] = 0.0 if entry is None else entry["exp_avg"].reshape(-1).numpy()
            self.exp_avg_sq[m, row] = 0.0 if entry is None else entry["exp_avg_sq"].reshape(-1).numpy()
        first = state.get(0)
        self.steps[m, 0] = 0.0 if first is None else float(first["step"])
