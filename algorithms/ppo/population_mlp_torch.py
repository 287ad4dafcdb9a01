"""The built-in network of a PPO population in torch, for a pack on a GPU.

The numpy learner of ``population_mlp.py`` runs on the CPU only. On a GPU each member's network is
:class:`BuiltinMember`, a torch module of the same layout (``weights.k`` ``[2, in, out]`` and
``biases.k`` ``[2, 1, out]``: ``[0]`` the policy, ``[1]`` the value, whose output layer is as wide as
the policy's and reads column 0), stacked with ``torch.func`` on the device as a user's module is
(``population_module.py``). Its members start as the numpy pack's from the same seeds, and a
member's checkpoint is the same (the names and order of the numpy learner's, which are the unpacked
trainer's ``ActorCritic``'s too), so a pack on a GPU and one on a CPU, or an unpacked trial,
continue each other's members. ``ActorCritic`` itself does not stack: it keeps references to its
own parameters (attribute access costs more than a 64-wide layer on a CPU), which
``functional_call`` cannot swap for a member's.

    nets = builtin_stack([4, 64, 64, 2], seeds=[0, 1], device="cuda")
    logits, values = nets.outputs(obs)          # obs [P, B, 4] (numpy) -> [P, B, 2], [P, B] (numpy)
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from algorithms.ppo.population_mlp import PackedNetworks
from algorithms.ppo.population_module import StackedModules

__all__ = ["BuiltinMember", "builtin_stack"]


class BuiltinMember(nn.Module):
    """One member's separate policy and value tanh MLPs, in ``PackedNetworks``' layout (see the
    module docstring); ``forward(obs [B, in])`` gives ``(logits [B, A], values [B])``."""

    def __init__(self, sizes: Sequence[int]) -> None:
        super().__init__()
        pairs = list(zip(sizes, sizes[1:]))
        self.weights = nn.ParameterList([nn.Parameter(torch.zeros(2, n_in, n_out)) for n_in, n_out in pairs])
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(2, 1, n_out)) for _, n_out in pairs])

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = obs.expand(2, *obs.shape)
        last = len(self.weights) - 1
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.matmul(h, w) + b
            if k < last:
                h = torch.tanh(h)
        return h[0], h[1, :, 0]


class _BuiltinStack(StackedModules):
    """Every member's :class:`BuiltinMember`, stacked, initialised as ``PackedNetworks``' members."""

    def initialise(self, m: int, seed: int) -> None:
        numpy_nets = PackedNetworks(self.model_config["sizes"], [seed])
        row = numpy_nets.row(0)
        own = {name: (offset, shape) for name, offset, shape in self.named_slices()}
        values = torch.empty(self.theta.shape[1])
        for name, offset, shape in numpy_nets.named_slices():
            at, size = own[name][0], int(torch.Size(shape).numel())
            values[at:at + size] = torch.from_numpy(row[offset:offset + size].copy())
        self.set_row(m, values.numpy())


def _member(observation_space: Any, action_space: Any, model_config: dict[str, Any]) -> BuiltinMember:
    return BuiltinMember(model_config["sizes"])


def builtin_stack(sizes: Sequence[int], seeds: Sequence[int], obs_space: Any = None, act_space: Any = None,
                  device: str = "cpu") -> StackedModules:
    """Every member's built-in network of layer ``sizes`` (observation, hidden..., actions) stacked
    on ``device``, member ``m`` drawn from ``seeds[m]`` as the numpy pack's."""
    nets = _BuiltinStack(_member, {"sizes": [int(s) for s in sizes]}, obs_space, act_space, seeds, device)
    for m, seed in enumerate(seeds):
        nets.initialise(m, seed)
    return nets
