"""Copies of one torch module stacked on a leading member axis and run as one with ``torch.func``.

P modules of one structure (a population's members, each drawn from its own seed) run as one:
``torch.func.functional_call`` of the structure under ``torch.func.vmap`` over the member axis of
their parameters and buffers, so each layer of every member is one batched operation (the
stacked layers of Flajolet et al.'s fastpbrl). The parameters are views of one float32 tensor
:attr:`theta` ``[P, D]`` on the population's device (a population's Adam,
``algorithms/optim/population_adam.py``, steps it whole; row ``m`` is member ``m``'s; on the CPU
:attr:`flat` is the same memory as a numpy array); buffers (a BatchNorm's running statistics) are
stacked tensors of their own, on that device too. A module stacks when its copies have the same parameters (names, shapes,
float32) and its ``forward`` runs under ``vmap``: no ``.item()``, no Python branch on a tensor's
value, no numpy.

    stack = StackedModules([make_q_network(...) for seed in seeds], device="cuda")
    q = stack.call(stack.theta, stack.acting_buffers(), obs)   # obs [P, B, ...] on the device -> [P, B, A]
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch
    from torch import nn


__all__ = ["StackedModules", "stack_failure"]


class StackedModules:
    """Copies of one module stacked (see the module docstring)."""

    def __init__(self, modules: Sequence[nn.Module], device: str = "cpu") -> None:
        import torch

        first = modules[0]
        self.param_shapes = [(name, tuple(p.shape)) for name, p in first.named_parameters()]
        if not self.param_shapes:
            raise ValueError("config key 'model': the module has no parameters to learn")
        wrong = [name for name, p in first.named_parameters() if p.dtype != torch.float32]
        if wrong:
            raise ValueError(f"config key 'model': a packed member's parameters are float32; {wrong} are not")
        self._slices: list[tuple[str, int, tuple[int, ...]]] = []
        offset = 0
        for name, shape in self.param_shapes:
            self._slices.append((name, offset, shape))
            offset += math.prod(shape)
        self.device = torch.device(device)
        self.theta = torch.zeros((len(modules), offset), device=self.device)
        self._buffers = {name: torch.stack([dict(m.named_buffers())[name].detach() for m in modules]).to(self.device)
                         for name, _ in first.named_buffers()}
        self.base = copy.deepcopy(first).to("meta")  # the structure only: weights come from theta
        for m, module in enumerate(modules):
            self.take(m, module)

    @property
    def flat(self) -> np.ndarray:
        """:attr:`theta` as a numpy array sharing its memory (a population on the CPU only)."""
        if self.device.type != "cpu":
            raise RuntimeError(f"a stack on {self.device} has no numpy view of its parameters; use its theta")
        return self.theta.numpy()

    @property
    def params(self) -> torch.Tensor:
        """What a population's Adam steps: :attr:`theta`."""
        return self.theta

    def gradient_buffer(self) -> torch.Tensor:
        """A zero buffer of :attr:`theta`'s shape and device, for a gradient."""
        import torch

        return torch.zeros_like(self.theta)

    def row(self, m: int) -> np.ndarray:
        """Member ``m``'s parameters ``[D]`` (a numpy copy)."""
        return self.theta[m].detach().cpu().numpy().copy()

    def set_row(self, m: int, values: np.ndarray) -> None:
        """Member ``m``'s parameters become ``values`` ``[D]``."""
        import torch

        self.theta[m] = torch.as_tensor(values, device=self.device)

    def finite(self, m: int) -> bool:
        """Whether member ``m``'s parameters are all finite."""
        return bool(self.theta[m].isfinite().all())

    def take(self, m: int, module: nn.Module) -> None:
        """Member ``m`` becomes ``module``'s copy (its parameters and buffers)."""
        params = dict(module.named_parameters())
        shapes = [(name, tuple(p.shape)) for name, p in params.items()]
        if shapes != self.param_shapes:
            raise ValueError(f"config key 'model': every copy of a packed member's module has the same parameters; "
                             f"one has {shapes}, another {self.param_shapes}")
        for name, offset, shape in self._slices:
            self.theta[m, offset:offset + math.prod(shape)] = params[name].detach().reshape(-1)
        buffers = dict(module.named_buffers())
        for name, stacked in self._buffers.items():
            stacked[m] = buffers[name].detach()

    def rows(self, members: Sequence[int]) -> Any:
        """The copies of ``members`` (their rows and buffers copied), as a stack of their own."""
        sub = object.__new__(type(self))
        sub.__dict__.update(self.__dict__)
        sub.theta = self.theta[list(members)]
        sub._buffers = {name: b[list(members)].clone() for name, b in self._buffers.items()}
        return sub

    def put_rows(self, members: Sequence[int], sub: StackedModules) -> None:
        """``sub``'s rows and buffers (of :meth:`rows` of ``members``) back into this stack."""
        self.theta[list(members)] = sub.theta
        for name, b in self._buffers.items():
            b[list(members)] = sub._buffers[name]

    def named_slices(self) -> list[tuple[str, int, tuple[int, ...]]]:
        """``(name, offset, shape)`` of each parameter in a row, in ``named_parameters`` order (the
        module's ``state_dict`` names, and a torch optimiser's numbering)."""
        return list(self._slices)

    def buffers(self, m: int) -> dict[str, torch.Tensor]:
        """Member ``m``'s buffers, by ``state_dict`` name (copies, on the CPU)."""
        return {name: b[m].cpu().clone() for name, b in self._buffers.items()}

    def load_buffers(self, m: int, state: Mapping[str, Any]) -> None:
        """Member ``m``'s buffers from a ``state_dict`` (those it holds)."""
        for name, b in self._buffers.items():
            if name in state:
                b[m] = state[name].to(self.device)

    def state_dict(self, m: int, theta: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Member ``m``'s module's ``state_dict`` (copies, on the CPU), its parameters from
        ``theta`` (default :attr:`theta`: another buffer of the same layout, a target network's, say)."""
        rows = self.theta if theta is None else theta
        state = {name: rows[m, offset:offset + math.prod(shape)].reshape(shape).detach().cpu().clone()
                 for name, offset, shape in self._slices}
        return {**state, **self.buffers(m)}

    def load_state_dict(self, m: int, state: Mapping[str, Any], theta: torch.Tensor | None = None) -> None:
        """Member ``m`` takes a ``state_dict`` of the module (into ``theta``, default :attr:`theta`);
        a parameter missing or of another shape is a ValueError naming ``pack_trials``."""
        rows = self.theta if theta is None else theta
        for name, offset, shape in self._slices:
            value = state.get(name)
            if value is None or tuple(value.shape) != shape:
                raise ValueError(f"pack_trials: the checkpoint's network does not fit this pack's members "
                                 f"({name}: {None if value is None else tuple(value.shape)} against {shape})")
            rows[m, offset:offset + math.prod(shape)] = value.reshape(-1).to(self.device)
        self.load_buffers(m, state)

    def acting_buffers(self, members: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
        """Copies of the buffers (of ``members`` only, if given), for a forward pass that must
        leave them as they are (acting: a BatchNorm's statistics move in learning only, and
        members absent from an iteration's learning keep theirs untouched)."""
        if members is None:
            return {name: b.clone() for name, b in self._buffers.items()}
        return {name: b[list(members)] for name, b in self._buffers.items()}  # indexing copies

    def call(self, theta: torch.Tensor, buffers: Mapping[str, torch.Tensor], *inputs: torch.Tensor) -> Any:
        """Every member's ``forward(*inputs)`` (each input ``[P, ...]``) under ``vmap``, with its
        parameters from ``theta`` ``[P, D]`` (laid out as :attr:`theta`; a tensor needing grad for
        learning) and ``buffers``, on the stack's device."""
        from torch.func import functional_call, vmap

        P = theta.shape[0]
        params = {name: theta[:, offset:offset + math.prod(shape)].reshape(P, *shape)
                  for name, offset, shape in self._slices}

        def one(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], *xs: torch.Tensor) -> Any:
            return functional_call(self.base, (p, b), xs)

        return vmap(one)(params, dict(buffers), *inputs)


def stack_failure(modules: Sequence[nn.Module], *inputs: torch.Tensor) -> str | None:
    """None when ``modules`` (copies of one module) stack and their forward and backward run under
    ``vmap`` on ``inputs`` (each ``[len(modules), ...]``), else why not, in one line naming the error."""

    try:
        stack = StackedModules(modules)
        theta = stack.theta.detach().requires_grad_()
        outputs = stack.call(theta, stack.acting_buffers(), *inputs)
        leaves = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        sum(leaf.float().sum() for leaf in leaves).backward()
    except Exception as error:  # noqa: BLE001 - any failure of a user's module means it does not stack
        first = (str(error).strip().splitlines() or [""])[0]
        return f"its module does not stack under torch.func.vmap ({type(error).__name__}: {first})"
    return None
