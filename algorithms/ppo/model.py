"""PPO's network: separate policy and value MLPs in torch, for the learner.

Its own module so that importing the ``PPO`` trainer (the driver does, to size a trial's
placement group) does not import torch; the learner imports this module when it builds its
policy, after it has started its rollout actors. Rollout actors act with the same network in
numpy (``algorithms/ppo/fast/numpy_policy.py``).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from algorithms.data.observations import Obs, ObsSpace, to_tensors
from algorithms.models.activations import ACTIVATION_FUNCTIONS
from algorithms.models.torch_policy import load_state_arrays, state_arrays
from algorithms.ppo.fast.narrow_matmul import narrow_baddbmm
from algorithms.ppo.fast.numpy_policy import NumpyActorCritic

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# ---------------------------------------------------------------------------------------------
# The network
# ---------------------------------------------------------------------------------------------
class ActorCritic(nn.Module):
    """Separate policy and value MLPs, evaluated together.

    Both MLPs have the same layer sizes, so their layers are stacked: layer ``k`` holds a weight
    of shape (2, in, out) (index 0: policy, 1: value function) and one batched matmul computes
    both networks' layer at once. It is the same function as two ``nn.Sequential``s with half the
    calls, and the calls are what a 64-wide MLP's speed on a CPU is made of. The output layer is
    stacked too, with ``num_outputs`` columns: the policy uses all of them (logits or Gaussian
    means), the value function its first (the other value columns are zero and stay zero: no
    loss reads them, so their gradient is zero).

    Discrete actions: a Categorical over logits. Box actions: a diagonal Gaussian with a
    state-independent log std (SB3's default), or with ``sde=True`` generalized state-dependent
    exploration (gSDE, Raffin et al. 2021, as SB3's ``use_sde``): the noise is a linear function
    ``phi(s) @ W`` of the policy's last hidden features, with ``W ~ N(0, exp(log_std)^2)`` drawn
    anew every ``sde_sample_freq`` steps (and at each fragment's start), so the action's std
    ``sqrt(phi(s)^2 @ exp(log_std)^2)`` depends on the state. The env gets the action clipped to
    its bounds, the learner the unclipped one.
    """

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space,
        hidden_sizes: list[int],
        activation: str,
        inference: str = "numpy",
        sde: bool = False,
        sde_sample_freq: int = -1,
        observation_space: gym.Space | None = None,
    ) -> None:
        super().__init__()
        if inference not in ("numpy", "torch"):
            raise ValueError(f"inference must be 'numpy' or 'torch', got {inference!r}")
        self.inference = inference
        self.activation = activation
        self.obs_dim = obs_dim
        self.action_space = action_space
        self.observation_space = observation_space
        # Observations as the env gives them, flattened to float on the parameters' device (None:
        # they come flat, float32).
        obs = ObsSpace(observation_space) if observation_space is not None else None
        self._flat = obs.flat_torch if obs is not None and not obs.identity else None
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.sde = sde
        self.sde_sample_freq = sde_sample_freq
        if isinstance(action_space, gym.spaces.Discrete):
            if sde:
                raise ValueError("config key 'use_sde': state-dependent exploration needs a Box action space")
            self.num_outputs = int(action_space.n)
        elif isinstance(action_space, gym.spaces.Box):
            self.num_outputs = int(np.prod(action_space.shape))
            # one log std per action, or with gSDE per (last hidden feature, action)
            std_shape = (hidden_sizes[-1], self.num_outputs) if sde else (self.num_outputs,)
            self.log_std = nn.Parameter(torch.zeros(std_shape))
        else:
            raise ValueError(f"action space {action_space} is not supported (Discrete or Box are)")
        self.act_fn = ACTIVATION_FUNCTIONS[activation]
        sizes = [obs_dim] + list(hidden_sizes) + [self.num_outputs]
        self.weights = nn.ParameterList(nn.Parameter(torch.empty(2, i, o)) for i, o in zip(sizes[:-1], sizes[1:]))
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(2, 1, o)) for o in sizes[1:])
        self.hidden_sizes = list(hidden_sizes)
        self._layers: Any = None  # plain references, see _tensors()
        self._numpy: NumpyActorCritic | None = None
        self._numpy_storage = 0

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Orthogonal init as in SB3 and CleanRL: sqrt(2) hidden, 0.01 policy output, 1 value output."""
        with torch.no_grad():
            *hidden, out = self.weights
            for w in hidden:
                for k in range(2):
                    nn.init.orthogonal_(w[k], gain=math.sqrt(2), generator=generator)
            nn.init.orthogonal_(out[0], gain=0.01, generator=generator)
            out[1].zero_()
            nn.init.orthogonal_(out[1, :, :1], gain=1.0, generator=generator)
            for b in self.biases:
                b.zero_()

    def _tensors(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        # Plain references to the parameters: nn.Module/ParameterList attribute access costs more
        # than the matmuls of a 64-wide layer. Parameters are only ever updated in place
        # (optimiser, load_state_dict), so the references stay valid.
        if self._layers is None:
            self._layers = list(zip(self.weights, self.biases))
        return self._layers

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(policy outputs: logits or Gaussian means, values, the policy's last hidden features)."""
        *hidden, (w_out, b_out) = self._tensors()
        act_fn = self.act_fn
        if self._flat is not None:
            obs = self._flat(obs)
        h = obs.expand(2, *obs.shape)
        for w, b in hidden:
            h = act_fn(torch.baddbmm(b, h, w))
        out = narrow_baddbmm(b_out, h, w_out)
        return out[0], out[1, :, 0], h[0]

    # -- learner side: log-probabilities (and entropy) of taken actions ---------------------
    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, with_entropy: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(log pi(actions | obs), entropy or None, V(obs)), differentiable."""
        pi_out, values, features = self(obs)
        entropy = None
        if self.discrete:
            logp = -nn.functional.cross_entropy(pi_out, actions, reduction="none")  # fused log_softmax + pick
            if with_entropy:
                logp_all = torch.log_softmax(pi_out, dim=-1)
                entropy = -(logp_all.exp() * logp_all).sum(-1)
            return logp, entropy, values
        if self.sde:  # std(s) = sqrt(phi(s)^2 @ exp(log_std)^2); features not trained through it (SB3)
            log_std = 0.5 * torch.log(features.detach().pow(2) @ torch.exp(2 * self.log_std) + 1e-6)
        else:
            log_std = self.log_std
        z = (actions - pi_out) * torch.exp(-log_std)
        logp = (-0.5 * z.pow(2) - log_std).sum(-1) - _LOG_SQRT_2PI * self.num_outputs
        if with_entropy:
            entropy = (0.5 + _LOG_SQRT_2PI + log_std).sum(-1).expand(len(values))
        return logp, entropy, values

    # -- rollout side: numpy in, numpy out -------------------------------------------------
    def numpy_policy(self) -> NumpyActorCritic:
        """This network's rollout side in numpy, on zero-copy views of these very parameters (made
        again when the parameters move to new storage, as FlatAdam moves them; on a GPU, a copy)."""
        first = self._tensors()[0][0]
        if first.device.type != "cpu":  # a learner on a GPU: a numpy copy of the current weights
            arrays = {name: p.detach().cpu().numpy() for name, p in self.named_parameters()}
            return NumpyActorCritic(**self.numpy_kwargs(), arrays=arrays)
        storage = first.data_ptr()
        if self._numpy is None or storage != self._numpy_storage:
            arrays = {name: p.detach().numpy() for name, p in self.named_parameters()}
            self._numpy, self._numpy_storage = NumpyActorCritic(**self.numpy_kwargs(), arrays=arrays), storage
        return self._numpy

    def numpy_kwargs(self) -> dict[str, Any]:
        """How a rollout actor builds this network's rollout side without torch."""
        return {"obs_dim": self.obs_dim, "action_space": self.action_space, "hidden_sizes": list(self.hidden_sizes),
                "activation": self.activation, "sde": self.sde, "sde_sample_freq": self.sde_sample_freq,
                "observation_space": self.observation_space}

    def act(
        self, obs: np.ndarray, rng: np.random.Generator, explore: bool = True, new_noise: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(env actions, actions, log-probabilities, values) for a batch of encoded observations.

        With ``inference="numpy"`` (the default) the network runs in numpy
        (``algorithms/ppo/fast/numpy_policy.py``); with ``"torch"`` its forward pass runs in torch.
        ``new_noise`` draws new gSDE exploration matrices first.
        """
        numpy_policy = self.numpy_policy()
        if self._numpy_inference():
            return numpy_policy.act(obs, rng, explore=explore, new_noise=new_noise)
        with torch.no_grad():
            pi_out, values, features = (t.cpu().numpy() for t in self(self._obs_tensor(obs)))
        return numpy_policy.act_on(pi_out, values, features, rng, explore=explore, new_noise=new_noise)

    def _numpy_inference(self) -> bool:
        return self.inference == "numpy" and self._tensors()[0][0].device.type == "cpu"

    def _obs_tensor(self, obs: Obs) -> Any:
        return to_tensors(obs, self._tensors()[0][0].device)

    def actions_tensor(self, columns: torch.Tensor) -> torch.Tensor:
        """A train batch's action columns (float, (B, k)) as :meth:`evaluate` takes them."""
        return columns[:, 0].long() if self.discrete else columns

    def begin_fragment(self) -> None:
        """Called by the rollout worker before each fragment: gSDE draws new noise then (SB3)."""
        self.numpy_policy().begin_fragment()

    def value(self, obs: np.ndarray) -> np.ndarray:
        if self._numpy_inference():
            return self.numpy_policy().value(obs)
        with torch.no_grad():
            return self(self._obs_tensor(obs))[1].cpu().numpy()

    def get_weights(self) -> dict[str, np.ndarray]:
        return state_arrays(self)

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Copy weights in place (the arrays may be read-only views of Ray's object store)."""
        load_state_arrays(self, weights)


def make_actor_critic(
    obs_dim: int,
    action_space: gym.Space,
    hidden_sizes: list[int],
    activation: str,
    inference: str = "numpy",
    sde: bool = False,
    sde_sample_freq: int = -1,
    observation_space: gym.Space | None = None,
) -> ActorCritic:
    """What a rollout worker calls to build its copy (weights arrive with its first request)."""
    return ActorCritic(obs_dim, action_space, hidden_sizes, activation, inference, sde, sde_sample_freq,
                       observation_space)
