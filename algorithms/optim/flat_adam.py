"""Adam over one flat parameter buffer, in numpy: the optimiser of PPO's numpy learner.

    params = list(net.parameters())
    adam = FlatAdam(params, lr=3e-4, eps=1e-5)            # params become views of adam.flat
    adam.step_flat(grad_numpy, max_grad_norm=0.5)          # a gradient laid out like adam.flat
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from algorithms.optim.flat_params import FlatParameters


class FlatAdam:
    """Adam (Kingma & Ba 2015, as ``torch.optim.Adam`` without weight decay or amsgrad, with
    ``clip_grad_norm_``'s global-norm clipping) over parameters that it re-homes as views of one
    flat buffer, stepped in numpy from a gradient laid out like :attr:`flat` (see
    :meth:`flat_views`): for a 64-wide network the number of calls is the update's cost, and a
    handful of whole-buffer numpy calls is the fewest. The parameters' storage moves to the flat
    buffer (``p.data`` is a view of it), so anything holding a view of a parameter must take it
    after this is built. Its state converts to and from ``torch.optim.Adam``'s, so checkpoints of
    the numpy and the torch learner restore into each other.
    """

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps = float(lr), betas, float(eps)
        if any(p.dtype != torch.float32 or p.device.type != "cpu" for p in self.params):
            raise ValueError("FlatAdam steps float32 parameters on the CPU")
        flat = FlatParameters(self.params, grads=False)
        self.flat, self.offsets = flat.flat.data, flat.offsets
        total = self.flat.numel()
        self.exp_avg = torch.zeros(total)
        self.exp_avg_sq = torch.zeros(total)
        self.steps = 0
        self._scratch = np.empty(total, dtype=np.float32)

    def flat_views(self, buffer: np.ndarray) -> list[np.ndarray]:
        """Views of a flat numpy ``buffer`` shaped like each parameter, in ``params`` order."""
        return [buffer[o:o + p.numel()].reshape(p.shape) for o, p in zip(self.offsets, self.params)]

    def step_flat(self, grad: np.ndarray, max_grad_norm: float | None = None) -> None:
        """One Adam step from a float32 gradient laid out like :attr:`flat` (modified in place by
        the clipping)."""
        if max_grad_norm is not None:
            coef = max_grad_norm / (math.sqrt(float(np.dot(grad, grad))) + 1e-6)
            if coef < 1.0:
                grad *= np.float32(coef)
        beta1, beta2 = self.betas
        self.steps += 1
        m, v, tmp = self.exp_avg.numpy(), self.exp_avg_sq.numpy(), self._scratch
        np.subtract(grad, m, out=tmp)  # m += (1 - beta1) (g - m), torch's lerp_
        tmp *= np.float32(1 - beta1)
        m += tmp
        v *= np.float32(beta2)
        np.multiply(grad, grad, out=tmp)
        tmp *= np.float32(1 - beta2)
        v += tmp
        np.sqrt(v, out=tmp)
        tmp *= np.float32(1 / math.sqrt(1 - beta2 ** self.steps))
        tmp += np.float32(self.eps)
        np.divide(m, tmp, out=tmp)
        tmp *= np.float32(-self.lr / (1 - beta1 ** self.steps))
        flat = self.flat.detach().numpy()
        flat += tmp

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone(),
                "lr": self.lr, "betas": list(self.betas), "eps": self.eps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["exp_avg"].shape != self.exp_avg.shape:
            raise ValueError(f"optimiser state for {state['exp_avg'].numel()} parameters, "
                             f"this network has {self.exp_avg.numel()}")
        self.steps = int(state["steps"])
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        self.lr, self.betas, self.eps = float(state["lr"]), tuple(state["betas"]), float(state["eps"])

    def torch_adam_state(self) -> dict[str, Any]:
        """This optimiser's moments as the ``state`` of a ``torch.optim.Adam`` state_dict."""
        return torch_adam_state(self.state_dict(), [p.shape for p in self.params])["state"]

    def load_torch_adam_state(self, state: dict[str, Any]) -> None:
        """Adopt the per-parameter ``state`` of a ``torch.optim.Adam`` state_dict (or the whole
        state_dict) over the same parameters, in the same order."""
        state = {"state": state} if "state" not in state else state
        per_param = [state["state"].get(i) for i in range(len(self.params))]
        if any(entry is None for entry in per_param):  # never stepped
            return
        self.exp_avg.copy_(torch.cat([e["exp_avg"].reshape(-1) for e in per_param]))
        self.exp_avg_sq.copy_(torch.cat([e["exp_avg_sq"].reshape(-1) for e in per_param]))
        self.steps = int(float(per_param[0]["step"]))


def torch_adam_state(flat_state: dict[str, Any], shapes: list[torch.Size]) -> dict[str, Any]:
    """A :meth:`FlatAdam.state_dict` as a ``torch.optim.Adam`` state_dict's ``state`` entry (per
    parameter, in order), inside ``{"state": ...}``; empty before the first step."""
    if not flat_state["steps"]:
        return {"state": {}}
    out, offset = {}, 0
    for i, shape in enumerate(shapes):
        size = math.prod(shape)
        out[i] = {"step": torch.tensor(float(flat_state["steps"])),
                  "exp_avg": flat_state["exp_avg"][offset:offset + size].reshape(shape).clone(),
                  "exp_avg_sq": flat_state["exp_avg_sq"][offset:offset + size].reshape(shape).clone()}
        offset += size
    return {"state": out}
