"""PPO's learner through autograd and ``torch.optim``: any network of the model contract, any
action space, any device. The parameters sit in one flat buffer where they allow it
(``algorithms/optim/flat_params.py``): one tensor to zero, clip and step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.ppo.learner import PPOLearner, StepOut
from algorithms.data.observations import Obs, to_tensors
from algorithms.core.learner_config import make_optimizer, set_lr, to_cpu

if TYPE_CHECKING:
    import torch


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
