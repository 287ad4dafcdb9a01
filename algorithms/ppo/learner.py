"""PPO's learner interface: what the trainer asks of a learner, whichever computes the update.

A learner owns the optimiser and runs ``num_epochs`` passes of minibatch SGD over a train batch
on the clipped PPO objective (:meth:`PPOLearner.update`). Two implement it:
``torch_learner.TorchPPOLearner`` (autograd and ``torch.optim``: any model, any device) and
``numpy_learner.NumpyPPOLearner`` (the gradient derived by hand for the built-in tanh MLP with
Discrete actions: fewer, cheaper calls on a CPU). They share the minibatch schedule below, so for
one seed both see the same minibatches in the same order.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from algorithms.sampling.fragment import TrainBatch
from algorithms.data.observations import Obs, index

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
