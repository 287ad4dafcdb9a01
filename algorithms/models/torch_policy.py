"""A module of the model contract (``algorithms/models/contract.py``) as a trainer's policy, in torch.

``TorchPolicy`` gives any ``forward(obs) -> (dist_inputs, value)`` module what the learner and
the rollout workers ask of a policy: ``act``/``value`` on numpy observations (sampling in numpy
with the worker's generator), ``evaluate`` for the loss (log-probabilities, entropy, values, on
the learner's device), and weights as CPU numpy arrays keyed like the module's ``state_dict``.

    policy = TorchPolicy(module, env.observation_space, env.action_space, device="cuda")
    env_actions, actions, logp, values = policy.act(obs, np.random.default_rng(0))
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from algorithms.models.distributions import action_distribution
from algorithms.models.contract import ModelFactory, build_model, check_model_outputs
from algorithms.data.observations import Obs, ObsSpace, to_tensors


class TorchPolicy:
    """A contract module, its action distribution and its device (see the module docstring).

    The module is checked once here (its outputs' shapes), so a wrong model fails the trial at
    its start, before any sampling, with one error naming ``model``.
    """

    def __init__(self, module: nn.Module, observation_space: gym.Space, action_space: gym.Space,
                 device: str | torch.device = "cpu", model: Any = None) -> None:
        self.module = module
        self.dist = action_distribution(action_space)
        self.obs_space = ObsSpace(observation_space)
        self.device = torch.device(device)
        module.to(self.device)
        check_model_outputs(module, observation_space, action_space, self.dist, self.device,
                            model if model is not None else type(module))

    # -- the learner's side ------------------------------------------------------------------
    def parameters(self) -> Iterator[nn.Parameter]:
        return self.module.parameters()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.module.state_dict()

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.module.load_state_dict(state)

    def _forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(dist_inputs, values of shape (batch,)) for a batch of observations as the env gave
        them, as tensors on the policy's device (made float here: see ``ObsSpace.model_input``)."""
        dist_inputs, value = self.module(self.obs_space.model_input(obs))
        return dist_inputs, value.reshape(len(dist_inputs))

    def actions_tensor(self, columns: torch.Tensor) -> torch.Tensor:
        """A train batch's action columns (float, (B, k)) as :meth:`evaluate` takes them."""
        return self.dist.actions_tensor(columns)

    def evaluate(self, obs: Any, actions: torch.Tensor,
                 with_entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(log pi(actions | obs), entropy or None, V(obs)), differentiable, on the policy's device."""
        dist_inputs, values = self._forward(obs)
        entropy = self.dist.entropy(dist_inputs) if with_entropy else None
        return self.dist.logp(dist_inputs, actions), entropy, values

    # -- the rollout side: numpy in, numpy out -------------------------------------------------
    def _outputs(self, obs: Obs) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            dist_inputs, values = self._forward(to_tensors(obs, self.device))
        return dist_inputs.float().cpu().numpy(), values.float().cpu().numpy()

    def begin_fragment(self) -> None:
        """A new fragment starts: nothing to do (see ``algorithms.sampling.fragment.RolloutPolicy``)."""

    def act(self, obs: Obs, rng: np.random.Generator, explore: bool = True,
            new_noise: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(env actions, actions, log-probabilities, values) for a batch of observations."""
        dist_inputs, values = self._outputs(obs)
        env_actions, actions, logp = self.dist.sample(dist_inputs, rng, explore)
        return env_actions, actions, logp, values

    def value(self, obs: Obs) -> np.ndarray:
        return self._outputs(obs)[1]

    def get_weights(self) -> dict[str, np.ndarray]:
        return state_arrays(self.module)

    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        load_state_arrays(self.module, weights)


def state_arrays(module: nn.Module) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` as CPU numpy arrays (views of CPU tensors, copies of others)."""
    return {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}


def load_state_arrays(module: nn.Module, weights: Mapping[str, np.ndarray]) -> None:
    """Copy numpy weights into the module's tensors in place, on whatever device they are (the
    arrays may be read-only views of Ray's object store)."""
    for k, v in module.state_dict().items():
        if v.device.type == "cpu":
            np.copyto(v.numpy(), weights[k])
        else:
            v.copy_(torch.from_numpy(np.array(weights[k])))


def make_torch_policy(model: Mapping[str, Any] | ModelFactory, model_config: Mapping[str, Any],
                      observation_space: gym.Space, action_space: gym.Space) -> TorchPolicy:
    """What a rollout actor calls to build its copy of a contract module, on CPU (weights arrive
    with its first request)."""
    dist = action_distribution(action_space)
    module = build_model(model, model_config, observation_space, action_space, dist)
    return TorchPolicy(module, observation_space, action_space, "cpu", model=model)
