"""A model's parameters as views of one contiguous buffer, and their gradients as views of another.

For a small network the number of calls is an update's cost: zeroing, clipping and stepping six
tensors costs several times what one tensor does. With the parameters re-homed here, the optimiser
steps the one flat parameter, clipping is one norm and one multiply, and autograd accumulates every
gradient in place into the flat gradient. The numbers are the per-parameter ones: every optimiser
PPO offers (Adam, AdamW, RMSprop, SGD) is elementwise, and the global norm is the same norm.

    flat = FlatParameters(list(module.parameters()))     # module's parameters are views of flat.flat now
    optimizer = torch.optim.Adam([flat.flat], lr=3e-4)
    flat.zero_grad(); loss.backward(); flat.clip_grad_norm_(0.5); optimizer.step()

Optimiser state converts to and from the per-parameter layout (:meth:`split_state`,
:meth:`join_state`), so checkpoints hold ``torch.optim``'s usual per-parameter state whichever
layout wrote them. Whatever moves a parameter to new storage afterwards (``module.to(device)``,
assigning ``p.data``) detaches it from the buffer: build this after the module is on its device.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch


class FlatParameters:
    """``params`` re-homed as views of :attr:`flat` (an ``nn.Parameter``), their ``.grad`` as views
    of :attr:`flat`'s gradient (``grads=False``: the parameters only, for an optimiser that does not
    read ``.grad``). See :meth:`fits` for which parameter lists qualify."""

    def __init__(self, params: list[torch.Tensor], grads: bool = True) -> None:
        if not self.fits(params, grads):
            raise ValueError("FlatParameters needs distinct floating-point parameters on one device, of one dtype"
                             + (", that require grad" if grads else ""))
        self.params = list(params)
        self.shapes = [p.shape for p in self.params]
        self.offsets: list[int] = []
        first = self.params[0]
        total = sum(p.numel() for p in self.params)
        data = torch.empty(total, dtype=first.dtype, device=first.device)
        grad = torch.zeros_like(data) if grads else None
        offset = 0
        for p in self.params:
            size = p.numel()
            data[offset:offset + size].copy_(p.detach().reshape(-1))
            p.data = data[offset:offset + size].view_as(p)
            # autograd adds into a gradient that exists (in place, without building a graph), so
            # every backward writes the flat gradient
            if grad is not None:
                p.grad = grad[offset:offset + size].view_as(p)
            self.offsets.append(offset)
            offset += size
        self.flat = torch.nn.Parameter(data, requires_grad=grads)
        self.flat.grad = grad

    @staticmethod
    def fits(params: list[torch.Tensor], grads: bool = True) -> bool:
        """Whether ``params`` can share one buffer: at least one, each once, all floating point, one
        dtype and one device, all requiring grad (unless ``grads`` is False)."""
        return bool(params) and all(
            p.is_floating_point() and (p.requires_grad or not grads) and p.dtype == params[0].dtype and p.device == params[0].device
            for p in params
        ) and len({id(p) for p in params}) == len(params)

    @property
    def grad(self) -> torch.Tensor:
        """The flat gradient; only a FlatParameters built with ``grads=True`` has one."""
        grad = self.flat.grad
        if grad is None:
            raise RuntimeError("FlatParameters(grads=False) keeps no gradient")
        return grad

    def zero_grad(self) -> None:
        self.grad.zero_()

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradient to a global L2 norm of at most ``max_norm`` as
        ``torch.nn.utils.clip_grad_norm_`` does (coefficient ``max_norm / (norm + 1e-6)``, at most 1);
        returns the norm before clipping."""
        grad = self.grad
        norm = torch.linalg.vector_norm(grad)
        if grad.device.type == "cpu":
            # the coefficient as a Python float: two calls instead of five, for an update made of
            # calls; reading it would make a GPU wait, so there it stays a tensor
            coefficient = max_norm / (float(norm) + 1e-6)
            if coefficient < 1.0:
                grad.mul_(coefficient)
        else:
            grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm

    # -- optimiser state between the flat and the per-parameter layout --------------------------
    def split_state(self, state: Mapping[int, Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
        """The ``state`` of a ``torch.optim`` state_dict over ``[flat]`` as the ``state`` it would
        have over ``params`` (tensors the size of the buffer split, the rest, such as ``step``, copied)."""
        entry = state.get(0)
        if entry is None:  # never stepped
            return {}
        total = self.flat.numel()
        out: dict[int, dict[str, Any]] = {}
        for i, (offset, shape) in enumerate(zip(self.offsets, self.shapes)):
            size = math.prod(shape)
            out[i] = {key: value[offset:offset + size].reshape(shape).clone()
                      if isinstance(value, torch.Tensor) and key != "step" and value.dim() == 1 and value.numel() == total
                      else (value.clone() if isinstance(value, torch.Tensor) else value)
                      for key, value in entry.items()}
        return out

    def join_state(self, state: Mapping[int, Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
        """Per-parameter optimiser ``state`` (as :meth:`split_state` gives, or a ``torch.optim``
        optimiser over ``params`` saved) as the ``state`` over ``[flat]``; empty unless every
        parameter has an entry. A ValueError when the entries do not match the parameters' shapes."""
        found = [state.get(i) for i in range(len(self.params))]
        entries = [entry for entry in found if entry is not None]
        if not entries or len(entries) < len(found):
            return {}
        joined: dict[str, Any] = {}
        for key, first in entries[0].items():
            if isinstance(first, torch.Tensor) and (first.dim() > 0 or key != "step"):  # per element: moments, momentum
                parts = [entry[key] for entry in entries]
                bad = [i for i, (part, shape) in enumerate(zip(parts, self.shapes)) if part.shape != shape]
                if bad:
                    raise ValueError(f"optimiser state {key!r} of parameter {bad[0]} has shape "
                                     f"{tuple(parts[bad[0]].shape)}, the parameter {tuple(self.shapes[bad[0]])}")
                joined[key] = torch.cat([part.reshape(-1) for part in parts])
            else:  # shared by every element (the step count): a copy, which the optimiser will advance
                joined[key] = first.clone() if isinstance(first, torch.Tensor) else first
        return {0: joined}
