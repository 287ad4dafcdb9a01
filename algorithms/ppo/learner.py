"""PPO's learner: the optimiser and ``num_epochs`` passes of minibatch SGD over a train batch on
the clipped objective (``loss.py``).

:class:`PPOLearner` is what the trainer asks of a learner, and holds the minibatch schedule;
:class:`TorchPPOLearner` computes the updates with autograd and ``torch.optim``: any network of
the model contract, any action space, any device, its parameters in one flat buffer where they
allow it (``algorithms/optim/flat_params.py``: one tensor to zero, clip and step). The built-in
network on a CPU learns faster with the gradient derived by hand in numpy, behind this same
interface (``fast/numpy_learner.py``); for one seed both see the same minibatches in the same order.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from algorithms.core.learner_config import make_optimizer, set_lr, to_cpu
from algorithms.data.observations import Obs, index, to_tensors
from algorithms.sampling.fragment import TrainBatch

if TYPE_CHECKING:
    import torch

#: (policy loss, value loss, ratio, log-ratio) of one minibatch update, arrays or tensors.
StepOut = tuple[Any, Any, Any, Any]


@dataclasses.dataclass(frozen=True)
class UpdateStats:
    """Means over an update's minibatches; the KL and clip fraction over its last epoch."""

    policy_loss: float
    vf_loss: float
    approx_kl: float
    clip_fraction: float
    num_sgd_updates: int


class PPOLearner(abc.ABC):
    """The optimiser and the minibatch updates of a PPO trainer's ``policy``.

    Subclasses give the update of one minibatch (:meth:`step`), how a minibatch's tables are
    held (:meth:`_tables`, :meth:`_epoch`), and the optimiser's learning rate and state.
    """

    name: ClassVar[str]

    def __init__(self, policy: Any, torch_rng: torch.Generator) -> None:
        self.policy = policy
        self.torch_rng = torch_rng  # the epochs' shuffles: the trainer's, saved with its state
        self.optimizer: Any = None

    # -- what each learner gives -------------------------------------------------------------------
    @abc.abstractmethod
    def step(self, minibatch: tuple[Any, ...], c: Mapping[str, Any]) -> StepOut:
        """One SGD update. ``minibatch``: observations (B, obs_dim), actions, old log-probabilities,
        old values, value targets and advantages (B,), as :meth:`minibatches` makes them."""

    @abc.abstractmethod
    def set_lr(self, lr: float) -> None:
        """The optimiser's learning rate from now on."""

    @abc.abstractmethod
    def state(self, c: Mapping[str, Any]) -> dict[str, Any]:
        """The optimiser's state, as ``{"name": optimiser name, "state": per-parameter state}``."""

    @abc.abstractmethod
    def load_state(self, saved: Mapping[str, Any], c: Mapping[str, Any]) -> None:
        """The optimiser's moments from :meth:`state` of either learner (same optimiser name)."""

    @abc.abstractmethod
    def optimizer_name(self, c: Mapping[str, Any]) -> str:
        """The name a checkpoint of this learner's optimiser is saved under."""

    @abc.abstractmethod
    def _tables(self, obs: Obs, actions: np.ndarray, per_step: np.ndarray) -> tuple[Any, Any, Any]:
        """The batch's three tables where the updates run (numpy arrays, or tensors on the device);
        the observations as the env gave them (the torch learner's policy reads them on its device)."""

    @abc.abstractmethod
    def _epoch(self, order: torch.Tensor, actions: Any) -> tuple[Any, Any]:
        """(the row index of an epoch's shuffle, the actions in that order as :meth:`step` takes them)."""

    @abc.abstractmethod
    def _clip_fraction(self, ratio: Any, clip: float) -> Any:
        """The fraction of ``ratio`` outside ``1 +- clip``, where the update ran."""

    # -- shared ----------------------------------------------------------------------------------
    def update(self, batch: TrainBatch, advantages: np.ndarray, c: Mapping[str, Any]) -> UpdateStats:
        """``num_epochs`` passes of minibatch SGD over ``batch`` with ``advantages`` (normalised
        and weighted by the trainer)."""
        # Per-update statistics stay where the update ran (a tensor on the learner's device, an
        # array in numpy) and are read once after the last epoch: a float() per update would wait
        # for a GPU to finish each one.
        losses: list[Any] = []
        kl_and_clip: list[Any] = []
        for last_epoch, minibatch in self.minibatches(batch, advantages, c):
            policy_loss, vf_loss, ratio, log_ratio = self.step(minibatch, c)
            losses.append((policy_loss, vf_loss))
            if last_epoch:  # how far the policy moved, measured during the final pass
                kl = ((ratio - 1) - log_ratio).mean()  # the k3 estimator (CleanRL, SB3)
                kl_and_clip.append((kl, self._clip_fraction(ratio, c["clip_param"])))
        (policy_loss, vf_loss), (approx_kl, clip_fraction) = _means(losses), _means(kl_and_clip)
        return UpdateStats(policy_loss, vf_loss, approx_kl, clip_fraction, len(losses))

    def minibatches(self, batch: TrainBatch, advantages: np.ndarray,
                    c: Mapping[str, Any]) -> Iterator[tuple[bool, tuple[Any, ...]]]:
        """(whether in the last epoch, minibatch) for ``num_epochs`` passes over the batch in a new
        random order each.

        Three tables are gathered once per epoch: observations and actions by row, and the four
        per-step numbers (old log-probabilities, old values, value targets, advantages) as rows
        of one (4, n) table, so that a minibatch's columns are contiguous slices, four views in
        one call: an update is made of calls at these sizes."""
        import torch

        n = len(advantages)
        num_minibatches = max(1, round(n / c["minibatch_size"]))
        bounds = [round(i * n / num_minibatches) for i in range(num_minibatches + 1)]
        obs, actions, per_step = self._tables(
            batch.obs,
            np.asarray(batch.actions, dtype=np.float32).reshape(n, -1),
            np.stack([batch.logp, batch.values, batch.returns, advantages]).astype(np.float32))
        for epoch in range(c["num_epochs"]):
            rows, epoch_actions = self._epoch(torch.randperm(n, generator=self.torch_rng), actions)
            epoch_obs, epoch_per_step = index(obs, rows), per_step[:, rows]
            for start, stop in zip(bounds[:-1], bounds[1:]):
                old_logp, old_values, returns, adv = _rows(epoch_per_step[:, start:stop])
                yield epoch == c["num_epochs"] - 1, (index(epoch_obs, slice(start, stop)), epoch_actions[start:stop],
                                                     old_logp, old_values, returns, adv)


def _means(rows: list[tuple[Any, ...]]) -> list[float]:
    """Column means of rows of scalars (floats, numpy scalars or 0-d tensors on any device), as
    floats: one transfer for tensors."""
    torch = sys.modules.get("torch")  # tensors come only from a learner that imported it
    if rows and torch is not None and isinstance(rows[0][0], torch.Tensor):
        return torch.stack([value for row in rows for value in row]).view(len(rows), -1).mean(0).tolist()
    return np.mean(np.asarray(rows, dtype=np.float64), axis=0).tolist()


def _rows(table: Any) -> Any:
    """The rows of a 2-d array or tensor as views (a tensor's ``unbind``: one call, where
    iterating a tensor goes through Python per row)."""
    return table.unbind(0) if hasattr(table, "unbind") else table


class TorchPPOLearner(PPOLearner):
    name = "torch"

    def __init__(self, policy: Any, torch_rng: torch.Generator, device: Any, c: Mapping[str, Any]) -> None:
        from algorithms.optim.flat_params import FlatParameters
        from algorithms.optim.optimizer_step import lean_step

        super().__init__(policy, torch_rng)
        self.device = device
        self._params = list(policy.parameters())
        self._flat = FlatParameters(self._params) if FlatParameters.fits(self._params) else None
        params = [self._flat.flat] if self._flat is not None else self._params
        self.optimizer = make_optimizer(params, c["optimizer"], c["optimizer_config"], c["lr"])
        self._optimizer_step = lean_step(self.optimizer)

    def step(self, minibatch: tuple[Any, ...], c: Mapping[str, Any]) -> StepOut:
        """One SGD update; the actions as the policy's ``actions_tensor`` makes them."""
        import torch

        from algorithms.ppo.loss import ppo_losses

        clip, vf_clip, vf_coeff, ent_coeff = c["clip_param"], c["vf_clip_param"], c["vf_loss_coeff"], c["entropy_coeff"]
        obs, actions, old_logp, old_values, target, adv = minibatch
        logp, entropy, values = self.policy.evaluate(obs, actions, with_entropy=ent_coeff > 0)
        # The clipped surrogate -mean(min(r A, clip(r) A)) and the value loss, one graph node
        # (algorithms/ppo/loss.py); with vf_clip, V is clipped around its sampling-time value
        # and the pessimistic max taken (CleanRL's clip_vloss; SB3's clip_range_vf takes the
        # clipped value alone).
        loss, policy_loss, vf_loss, ratio, log_ratio = ppo_losses(
            logp, values, old_logp=old_logp, advantages=adv, targets=target, old_values=old_values,
            clip=clip, vf_clip=vf_clip, vf_coeff=vf_coeff)
        if entropy is not None:
            loss = loss - ent_coeff * entropy.mean()
        flat = self._flat
        if flat is not None:
            flat.zero_grad()
        else:
            self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c["max_grad_norm"] is not None:
            if flat is not None:
                flat.clip_grad_norm_(c["max_grad_norm"])
            else:
                torch.nn.utils.clip_grad_norm_(self._params, c["max_grad_norm"])
        self._optimizer_step()
        return policy_loss, vf_loss, ratio, log_ratio

    def set_lr(self, lr: float) -> None:
        set_lr(self.optimizer, lr)

    def optimizer_name(self, c: Mapping[str, Any]) -> str:
        return str(c["optimizer"])

    def state(self, c: Mapping[str, Any]) -> dict[str, Any]:
        state = to_cpu(self.optimizer.state_dict()["state"])
        if self._flat is not None:  # saved per parameter, whichever layout the learner had
            state = self._flat.split_state(state)
        return {"name": self.optimizer_name(c), "state": state}

    def load_state(self, saved: Mapping[str, Any], c: Mapping[str, Any]) -> None:
        # the moments only: the hyperparameters are this trial's config's
        moments = self._flat.join_state(saved["state"]) if self._flat is not None else saved["state"]
        current = self.optimizer.state_dict()
        self.optimizer.load_state_dict({**current, "state": moments})  # onto the parameters' device

    def _tables(self, obs: Obs, actions: np.ndarray, per_step: np.ndarray) -> tuple[Any, Any, Any]:
        import torch

        return (to_tensors(obs, self.device), *(torch.from_numpy(a).to(self.device) for a in (actions, per_step)))

    def _epoch(self, order: torch.Tensor, actions: Any) -> tuple[Any, Any]:
        index = order.to(self.device)
        return index, self.policy.actions_tensor(actions[index])

    def _clip_fraction(self, ratio: Any, clip: float) -> Any:
        return (abs(ratio - 1) > clip).float().mean()
