"""PPO's numpy learner: the minibatch loss and its gradient, derived by hand and computed in
numpy, for Categorical policies with tanh MLPs (``algorithms.ppo.model.ActorCritic``'s stacked
layout), behind the same learner interface as the torch one (``algorithms/ppo/learner.py``).

For a 64-wide network on a CPU, the number of calls is what an SGD update costs, and a numpy call
costs a fraction of a torch one (no dispatcher, no autograd bookkeeping). So for the networks it
covers (:func:`covers`), PPO's learner runs its minibatch updates here, on numpy views of the very
torch parameters (``FlatAdam``'s flat buffer), and writes the gradient straight into a flat
buffer for ``FlatAdam.step_flat``: PPO's ``learner="numpy"``. Other networks learn with autograd
and torch.optim (``learner="torch"``). The numbers are autograd's on the same loss
(tests/algorithms/ppo/test_numpy_learner.py, tests/algorithms/ppo/test_ppo.py).

    update = NumpyPPOUpdate(policy, adam)
    stats = update.loss_and_grad(obs, actions, old_logp, old_values, returns, advantages,
                                 clip=0.2, vf_clip=None, vf_coeff=0.5, ent_coeff=0.0)
    adam.step_flat(update.grad, max_grad_norm=0.5)

The derivation, with ``z`` the logits, ``p = softmax(z)``, ``r = exp(log p_a - old_logp)`` and ``B``
the minibatch size:

* surrogate ``-mean(min(A r, A clip(r)))``: ``d/d log p_a = -A r / B`` where the unclipped term is
  the smaller (or equal), else 0; and ``d log p_a / dz = onehot(a) - p``;
* entropy bonus ``-c mean(H)``, ``H = -sum p log p``: ``dz = c p (log p + H) / B``;
* value loss ``vf_coeff * 0.5 * mean((v - R)^2)``: ``dv = vf_coeff (v - R) / B``; with value
  clipping (``vf_clip``), ``0.5 * mean(max((v - R)^2, (v_clip - R)^2))``, the clipped branch has
  zero gradient (its ``v`` is clamped), so ``dv`` is kept only where the unclipped term wins;
* then the layers' chain rule, with ``tanh' = 1 - tanh^2``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.ppo.learner import PPOLearner, StepOut
from algorithms.optim.flat_adam import FlatAdam
from algorithms.core.learner_config import OPTIMIZERS
from algorithms.data.observations import Obs

if TYPE_CHECKING:
    import torch


def covers(policy: Any) -> bool:
    """Whether :class:`NumpyPPOUpdate` computes this policy's update: Categorical actions, tanh."""
    return bool(policy.discrete) and policy.activation == "tanh"


class NumpyPPOUpdate:
    """The clipped PPO loss of a minibatch and its gradient into :attr:`grad` (laid out like the
    optimiser's flat buffer), for an ``ActorCritic`` whose parameters ``adam`` holds."""

    def __init__(self, policy: Any, adam: FlatAdam) -> None:
        if not covers(policy):
            raise ValueError("NumpyPPOUpdate covers Categorical policies with tanh layers only")
        params = list(policy.parameters())
        if [id(p) for p in params] != [id(p) for p in adam.params]:
            raise ValueError("the optimiser must hold the policy's parameters, in parameters() order")
        layers = list(zip(policy.weights, policy.biases))
        # zero-copy views of the parameters (they live in adam.flat, updated in place)
        self.weights = [w.detach().numpy() for w, _ in layers]
        self.biases = [b.detach().numpy() for _, b in layers]
        self.grad = np.zeros(adam.flat.numel(), dtype=np.float32)
        views = {id(p): v for p, v in zip(params, adam.flat_views(self.grad))}
        self.grad_weights = [views[id(w)] for w, _ in layers]  # (2, in, out) each
        self.grad_biases = [views[id(b)] for _, b in layers]  # (2, 1, out) each
        self._ones: np.ndarray = np.ones((1, 0), dtype=np.float32)
        self._rows: np.ndarray = np.arange(0)
        self._d_out: np.ndarray = np.zeros((2, 0, 1), dtype=np.float32)

    def loss_and_grad(
        self, obs: np.ndarray, actions: np.ndarray, old_logp: np.ndarray, old_values: np.ndarray,
        returns: np.ndarray, advantages: np.ndarray, clip: float, vf_clip: float | None,
        vf_coeff: float, ent_coeff: float,
    ) -> tuple[float, float, np.ndarray, np.ndarray]:
        """Write the gradient of ``policy_loss + vf_coeff * vf_loss - ent_coeff * entropy`` into
        :attr:`grad`; return (policy loss, value loss, ratio, log ratio). ``actions`` are
        integer indices (0-based), the other arrays float32 of shape (B,) or (B, obs_dim)."""
        n = len(obs)
        if self._ones.shape[1] != n:  # per-minibatch-size constants
            self._ones = np.ones((1, n), dtype=np.float32)
            self._rows = np.arange(n)
            self._d_out = np.zeros((2, n, self.weights[-1].shape[2]), dtype=np.float32)
        rows, d_out = self._rows, self._d_out
        weights, biases = self.weights, self.biases
        # (ufuncs and their .reduce throughout: ndarray.mean, np.clip and np.where cost several
        # times a ufunc call in Python wrappers, and calls are what this update is made of)
        # forward: both MLPs at once, layer k as (2, B, out)
        hs = [obs]
        for w, b in zip(weights[:-1], biases[:-1]):
            h = np.matmul(hs[-1], w)
            h += b
            np.tanh(h, out=h)
            hs.append(h)
        out = np.matmul(hs[-1], weights[-1])
        out += biases[-1]
        logits, values = out[0], out[1, :, 0]
        shifted = logits - np.maximum.reduce(logits, axis=1, keepdims=True)
        exp = np.exp(shifted)
        total = np.add.reduce(exp, axis=1, keepdims=True)
        logp_all = shifted - np.log(total)
        probs = exp / total
        log_ratio = logp_all[rows, actions] - old_logp
        ratio = np.exp(log_ratio)
        unclipped = advantages * ratio
        clipped = np.minimum(np.maximum(ratio, np.float32(1 - clip)), np.float32(1 + clip))
        clipped *= advantages
        policy_loss = -float(np.add.reduce(np.minimum(unclipped, clipped))) / n
        diff = values - returns
        square = diff * diff
        if vf_clip is None:
            vf_loss = 0.5 * float(np.add.reduce(square)) / n
        else:  # clip V around its sampling-time value, pessimistic max (CleanRL's clip_vloss; SB3's clip_range_vf takes the clipped value alone)
            clipped_diff = old_values + np.clip(values - old_values, -vf_clip, vf_clip) - returns
            square_clipped = clipped_diff * clipped_diff
            vf_loss = 0.5 * float(np.maximum(square, square_clipped).mean())
            diff = diff * (square >= square_clipped)
        # d loss / d outputs (d_out[1, :, 1:], the unused value columns, stays zero)
        g_logp = unclipped * (unclipped <= clipped)
        g_logp *= np.float32(-1.0 / n)
        d_logits = d_out[0]
        np.multiply(probs, -g_logp[:, None], out=d_logits)
        d_logits[rows, actions] += g_logp
        if ent_coeff:
            entropy = np.add.reduce(probs * logp_all, axis=1, keepdims=True)
            np.subtract(logp_all, entropy, out=logp_all)  # log p + H
            logp_all *= probs
            logp_all *= np.float32(ent_coeff / n)
            d_logits += logp_all
        np.multiply(diff, np.float32(vf_coeff / n), out=d_out[1, :, 0])
        # backward through the layers, straight into the flat gradient
        delta = d_out
        for k in range(len(weights) - 1, -1, -1):
            h_in = hs[k]
            if h_in.ndim == 2:  # the observations, shared by both networks
                np.matmul(h_in.T, delta, out=self.grad_weights[k])
            else:
                np.matmul(h_in.transpose(0, 2, 1), delta, out=self.grad_weights[k])
            np.matmul(self._ones, delta, out=self.grad_biases[k])  # sum over the minibatch
            if k:
                delta = np.matmul(delta, weights[k].transpose(0, 2, 1))
                h = hs[k]
                delta *= 1 - h * h
        return policy_loss, vf_loss, ratio, log_ratio


class NumpyPPOLearner(PPOLearner):
    """PPO's updates in numpy, Adam stepped on ``FlatAdam``'s flat buffer: for the networks that
    :func:`covers` (the trainer checks the rest: CPU, Adam), fewer and cheaper calls than autograd."""

    name = "numpy"

    def __init__(self, policy: Any, torch_rng: torch.Generator, c: Mapping[str, Any]) -> None:
        super().__init__(policy, torch_rng)
        self.optimizer = FlatAdam(list(policy.parameters()), lr=c["lr"], **{**OPTIMIZERS["adam"], **c["optimizer_config"]})
        self._update = NumpyPPOUpdate(policy, self.optimizer)

    def step(self, minibatch: tuple[Any, ...], c: Mapping[str, Any]) -> StepOut:
        """One SGD update, gradient by hand; the actions as integer indices (B,)."""
        obs, actions, old_logp, old_values, returns, adv = minibatch
        update = self._update
        out = update.loss_and_grad(obs, actions, old_logp, old_values, returns, adv,
                                   c["clip_param"], c["vf_clip_param"], c["vf_loss_coeff"], c["entropy_coeff"])
        self.optimizer.step_flat(update.grad, c["max_grad_norm"])
        return out

    def set_lr(self, lr: float) -> None:
        self.optimizer.lr = lr

    def optimizer_name(self, c: Mapping[str, Any]) -> str:
        return "adam"

    def state(self, c: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": "adam", "state": self.optimizer.torch_adam_state()}  # as torch.optim.Adam's

    def load_state(self, saved: Mapping[str, Any], c: Mapping[str, Any]) -> None:
        self.optimizer.load_torch_adam_state(saved["state"])

    def _tables(self, obs: Obs, actions: np.ndarray, per_step: np.ndarray) -> tuple[Any, Any, Any]:
        flat = self.policy.numpy_policy().flat_obs(obs)  # float32, (n, obs_dim)
        return np.ascontiguousarray(flat, dtype=np.float32), actions, per_step

    def _epoch(self, order: torch.Tensor, actions: Any) -> tuple[Any, Any]:
        index = order.numpy()
        return index, actions[index, 0].astype(np.int64)

    def _clip_fraction(self, ratio: Any, clip: float) -> Any:
        return (abs(ratio - 1) > clip).mean(dtype=np.float32)
