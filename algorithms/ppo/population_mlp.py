"""The built-in network of a PPO population, in numpy: every member's separate policy and value
tanh MLPs stacked, and PPO's loss gradient derived by hand (``fast/numpy_learner.py`` has the
derivation) with a member axis in front.

Layers are stacked on two leading axes, member and network (weights ``[P, 2, in, out]``:
``[:, 0]`` the policies, ``[:, 1]`` the values), so one layer of every member's two networks is
one batched matmul; member ``m``'s parameters are row ``m`` of one flat buffer ``[P, D]``.
``population_module.py`` is the same interface over a user's torch module.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

F32 = np.float32


class PackedNetworks:
    """Every member's policy and value MLP: layer ``k`` as ``weights[k]`` ``[P, 2, in, out]`` and
    ``biases[k]`` ``[P, 2, 1, out]``, views of :attr:`flat` ``[P, D]``. The value network's output
    layer is as wide as the policy's; only its column 0 is used (the others stay 0).

    A member's layers are initialised as the trainers' built-in ones (orthogonal, gain sqrt 2;
    the policy's output 0.01, the value's 1; biases 0) from the member's own seed.
    """

    def __init__(self, sizes: list[int], seeds: Sequence[int]) -> None:
        P = len(seeds)
        shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
            ((2, n_in, n_out), (2, 1, n_out)) for n_in, n_out in zip(sizes, sizes[1:])]
        size = sum(int(np.prod(w)) + int(np.prod(b)) for w, b in shapes)
        self.sizes = sizes
        self.flat = np.zeros((P, size), dtype=F32)
        self.weights, self.biases = self.views(self.flat, shapes)
        self.shapes = shapes
        for m, seed in enumerate(seeds):
            self.initialise(m, seed)

    @classmethod
    def over(cls, flat: np.ndarray, shapes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]) -> PackedNetworks:
        """Networks whose parameters are ``flat`` (laid out as :attr:`flat`), not copied."""
        nets = object.__new__(cls)
        nets.flat, nets.shapes = flat, list(shapes)
        nets.weights, nets.biases = cls.views(flat, shapes)
        return nets

    def initialise(self, m: int, seed: int) -> None:
        """Member ``m``'s layers drawn anew from ``seed`` (see the class docstring)."""
        import torch

        sizes, last = self.sizes, len(self.shapes) - 1
        self.flat[m] = 0.0
        g = torch.Generator().manual_seed(int(seed))
        for net, out_gain in ((0, 0.01), (1, 1.0)):
            for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
                n_out = 1 if (net == 1 and k == last) else n_out
                w = torch.empty(n_out, n_in)
                torch.nn.init.orthogonal_(w, gain=out_gain if k == last else math.sqrt(2), generator=g)
                self.weights[k][m, net, :, :n_out] = w.T.numpy()

    @staticmethod
    def views(flat: np.ndarray, shapes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Layer views ``[P, *shape]`` of a ``[P, D]`` buffer laid out as :attr:`flat`."""
        P, offset = flat.shape[0], 0
        weights: list[np.ndarray] = []
        biases: list[np.ndarray] = []
        for w_shape, b_shape in shapes:
            for shape, out in ((w_shape, weights), (b_shape, biases)):
                n = int(np.prod(shape))
                out.append(flat[:, offset:offset + n].reshape(P, *shape))
                offset += n
        return weights, biases

    def forward(self, obs: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The layers' outputs for ``obs`` ``[P, B, obs_dim]``: the hidden activations (the first
        the observations, ``[P, 1, B, obs_dim]``) and the output ``[P, 2, B, A]``."""
        hs = [obs[:, None]]
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            h = np.matmul(hs[-1], w)
            h += b
            tanh_(h)
            hs.append(h)
        out = np.matmul(hs[-1], self.weights[-1])
        out += self.biases[-1]
        return hs, out

    @property
    def params(self) -> np.ndarray:
        """What a population's Adam steps: :attr:`flat`."""
        return self.flat

    def gradient_buffer(self) -> np.ndarray:
        """A zero buffer of :attr:`flat`'s shape, for a gradient."""
        return np.zeros_like(self.flat)

    def row(self, m: int) -> np.ndarray:
        """Member ``m``'s parameters ``[D]`` (a copy)."""
        return self.flat[m].copy()

    def set_row(self, m: int, values: np.ndarray) -> None:
        """Member ``m``'s parameters become ``values`` ``[D]``."""
        self.flat[m] = values

    def finite(self, m: int) -> bool:
        """Whether member ``m``'s parameters are all finite."""
        return bool(np.isfinite(self.flat[m]).all())

    def rows(self, members: Sequence[int]) -> PackedNetworks:
        """The networks of ``members`` (a copy of their rows), as a population of their own."""
        nets = self.over(self.flat[list(members)], self.shapes)
        nets.sizes = self.sizes
        return nets

    def put_rows(self, members: Sequence[int], sub: PackedNetworks) -> None:
        """``sub``'s rows (of :meth:`rows` of ``members``) back into this population."""
        self.flat[list(members)] = sub.flat

    def named_slices(self) -> list[tuple[str, int, tuple[int, ...]]]:
        """``(name, offset, shape)`` of each parameter in a member's row, in the order a PPO
        checkpoint numbers them (the numpy policy's: every layer's weights, then its biases)."""
        offsets, offset = [], 0
        for w_shape, b_shape in self.shapes:
            offsets.append((offset, offset + int(np.prod(w_shape))))
            offset += int(np.prod(w_shape)) + int(np.prod(b_shape))
        return ([(f"weights.{k}", w, shape) for k, ((w, _), (shape, _)) in enumerate(zip(offsets, self.shapes))]
                + [(f"biases.{k}", b, shape) for k, ((_, b), (_, shape)) in enumerate(zip(offsets, self.shapes))])

    def buffers(self, m: int) -> dict[str, Any]:
        """Member ``m``'s tensors that are not learnt (none here)."""
        return {}

    def load_buffers(self, m: int, state: Mapping[str, Any]) -> None:
        """Member ``m``'s tensors that are not learnt, from a checkpoint's policy (none here)."""

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits ``[P, B, A]`` and values ``[P, B]`` for ``obs`` ``[P, B, obs_dim]``."""
        out = self.forward(obs)[1]
        return out[:, 0], out[:, 1, :, 0]

    def loss_gradient(self, mb: Mapping[str, np.ndarray], adv: np.ndarray, weight: np.ndarray,
                      coeffs: Mapping[str, np.ndarray], grad: np.ndarray) -> dict[str, np.ndarray]:
        """Every member's PPO loss on its minibatch (``mb``'s ``[P, M, ...]`` rows; ``adv``
        normalised; ``weight`` ``[P, M]`` 1/n on its real rows; ``coeffs`` ``[P, 1]`` columns of
        clip_param, vf_loss_coeff, entropy_coeff) and its gradient, by hand, into ``grad`` ``[P, D]``.
        Per member: the policy and value losses, entropy, ratio and log-ratio."""
        grad_weights, grad_biases = self.views(grad, self.shapes)
        hs, out = self.forward(mb["obs"])
        logits, values = out[:, 0], out[:, 1, :, 0]
        logp_all = log_softmax(logits)
        probs = np.exp(logp_all)
        onehot = np.arange(logits.shape[-1]) == mb["actions"][..., None]
        log_ratio = (logp_all * onehot).sum(-1) - mb["logp"]
        ratio = np.exp(log_ratio)
        clip = coeffs["clip_param"]
        unclipped = adv * ratio
        clipped = adv * np.clip(ratio, 1 - clip, 1 + clip)
        policy_loss = -(np.minimum(unclipped, clipped) * weight).sum(axis=1)
        diff = values - mb["returns"]
        vf_loss = 0.5 * (diff * diff * weight).sum(axis=1)
        plogp = (probs * logp_all).sum(-1, keepdims=True)  # -H
        entropy = -(plogp[..., 0] * weight).sum(axis=1)
        # d loss / d outputs, every member's rows scaled by its own 1/n
        g_logp = -unclipped * (unclipped <= clipped) * weight
        d_out = np.zeros_like(out)
        d_out[:, 0] = (onehot - probs) * g_logp[..., None]
        d_out[:, 0] += (coeffs["entropy_coeff"] * weight)[..., None] * probs * (logp_all - plogp)
        d_out[:, 1, :, 0] = coeffs["vf_loss_coeff"] * diff * weight
        delta = d_out
        for k in range(len(hs) - 1, -1, -1):
            np.matmul(hs[k].transpose(0, 1, 3, 2), delta, out=grad_weights[k])
            grad_biases[k][...] = delta.sum(axis=2, keepdims=True)
            if k:
                delta = np.matmul(delta, self.weights[k].transpose(0, 1, 3, 2))
                tanh_grad = np.square(hs[k], out=hs[k])  # hs[k] is read for the last time here
                np.subtract(1.0, tanh_grad, out=tanh_grad)
                delta *= tanh_grad
        return {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, "ratio": ratio,
                "log_ratio": log_ratio}


#: glibc's mallopt parameters (malloc.h), and the size under which freed memory stays in the heap.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _KEEP_BYTES = -1, -3, 256 << 20


def keep_freed_memory() -> None:
    """Let glibc keep up to 256 MiB of freed memory for reuse instead of handing it back to the OS.

    A pack's temporaries are megabytes each (``[P, 2, 512, 64]`` floats) and made anew every
    update; by default glibc gives such blocks back when they are freed, and the next update's
    arrays come back as fresh pages, each zeroed by a page fault: that page-faulting took a third
    of a 16-member update (benchmarks/RESULTS.md). Process-wide, in the process that hosts a pack;
    a no-op where the C library is not glibc.
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES)
        libc.mallopt(_M_MMAP_THRESHOLD, _KEEP_BYTES)
    except (OSError, AttributeError):
        pass


def tanh_(h: np.ndarray) -> np.ndarray:
    """``tanh`` of a C-contiguous float32 array in place, as ``1 - 2 / (exp(2h) + 1)`` with
    torch's vectorised ``exp`` (on the same memory): a pack's hidden activations are millions of
    floats an update, and numpy's and torch's own float32 ``tanh`` take twice as long there
    (benchmarks/RESULTS.md). Within 2e-7 of ``np.tanh``; 1 and -1 where ``exp`` saturates."""
    import torch

    torch.from_numpy(h).mul_(2.0).exp_().add_(1.0).reciprocal_().mul_(-2.0).add_(1.0)
    return h


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
