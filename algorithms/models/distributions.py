"""Action distributions built from a model's ``dist_inputs``: sampling in numpy, log-probabilities
and entropy in torch.

The model contract (``algorithms/models/contract.py``) has a network return ``dist_inputs`` per
observation; what they mean depends on the action space alone, as in RLlib's default models:

* ``Discrete(n)``: ``n`` logits of a Categorical;
* ``MultiDiscrete(nvec)``: ``sum(nvec)`` logits, one Categorical per sub-action, concatenated;
* ``Box(shape)``: ``2 * prod(shape)`` numbers, the Gaussian means then the log standard
  deviations of a diagonal Gaussian over the flattened action.

Actions travel between rollout actors and the learner flat: an int index per Categorical, the
unclipped float action for a Box (the env gets it clipped to the box).

    dist = action_distribution(gym.spaces.Discrete(3))
    env_actions, actions, logp = dist.sample(dist_inputs_numpy, rng)      # rollout side
    logp_t, entropy_t = dist.logp(dist_inputs_tensor, actions_tensor), dist.entropy(dist_inputs_tensor)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:
    import torch

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# ---------------------------------------------------------------------------------------------
# numpy: the rollout side
# ---------------------------------------------------------------------------------------------
def sample_categorical(logits: np.ndarray, rng: np.random.Generator, explore: bool) -> tuple[np.ndarray, np.ndarray]:
    """(actions, log-probabilities) of Categoricals over the rows of ``logits``; the mode without
    ``explore``. Gumbel-max: argmax(logits + Gumbel noise) is a Categorical sample."""
    actions = (logits + rng.gumbel(size=logits.shape)).argmax(axis=1) if explore else logits.argmax(axis=1)
    # fancy indexing: a third of take_along_axis's cost, in the rollout actors' hot loop
    logp = logits[np.arange(len(logits)), actions] - np.logaddexp.reduce(logits, axis=1)
    return actions, logp.astype(np.float32, copy=False)


def gaussian_logp(eps: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """Log-density of a diagonal Gaussian at ``mean + exp(log_std) * eps``, summed over actions."""
    return ((-0.5 * eps * eps - log_std).sum(axis=1) - _LOG_SQRT_2PI * eps.shape[1]).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------
# The distributions of each action space
# ---------------------------------------------------------------------------------------------
class ActionDistribution:
    """How ``dist_inputs`` of one action space become actions, log-probabilities and entropy."""

    #: Columns of ``dist_inputs``.
    size: int
    #: The ``dist_inputs`` layout in words, for error messages.
    layout: str

    def sample(self, dist_inputs: np.ndarray, rng: np.random.Generator,
               explore: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(env actions, flat actions to learn from, log-probabilities) for a batch, in numpy."""
        raise NotImplementedError

    def actions_tensor(self, columns: torch.Tensor) -> torch.Tensor:
        """Flat actions (float columns of a train batch, (B, k)) in the form :meth:`logp` takes."""
        raise NotImplementedError

    def logp(self, dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def entropy(self, dist_inputs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class Categorical(ActionDistribution):
    def __init__(self, space: gym.spaces.Discrete) -> None:
        self.size = int(space.n)
        self.start = int(space.start)
        self.layout = f"{self.size} logits"

    def sample(self, dist_inputs: np.ndarray, rng: np.random.Generator,
               explore: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        actions, logp = sample_categorical(dist_inputs, rng, explore)
        return (actions + self.start if self.start else actions), actions, logp

    def actions_tensor(self, columns: torch.Tensor) -> torch.Tensor:
        return columns[:, 0].long()

    def logp(self, dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        import torch

        return -torch.nn.functional.cross_entropy(dist_inputs, actions, reduction="none")  # fused log_softmax + pick

    def entropy(self, dist_inputs: torch.Tensor) -> torch.Tensor:
        import torch

        logp_all = torch.log_softmax(dist_inputs, dim=-1)
        return -(logp_all.exp() * logp_all).sum(-1)


class MultiCategorical(ActionDistribution):
    def __init__(self, space: gym.spaces.MultiDiscrete) -> None:
        if space.nvec.ndim != 1:
            raise ValueError(f"action space {space}: only 1-D MultiDiscrete spaces are supported")
        self.nvec = [int(n) for n in space.nvec]
        self.start = np.asarray(space.start, dtype=np.int64)
        self.size = sum(self.nvec)
        self.bounds = np.cumsum([0] + self.nvec).tolist()
        self.layout = f"{self.size} logits ({' + '.join(map(str, self.nvec))}, one Categorical per sub-action)"

    def sample(self, dist_inputs: np.ndarray, rng: np.random.Generator,
               explore: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = [sample_categorical(dist_inputs[:, a:b], rng, explore) for a, b in zip(self.bounds[:-1], self.bounds[1:])]
        actions = np.stack([a for a, _ in parts], axis=1)
        logp = np.add.reduce([lp for _, lp in parts])
        return actions + self.start, actions, logp

    def actions_tensor(self, columns: torch.Tensor) -> torch.Tensor:
        return columns.long()

    def _split(self, dist_inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return dist_inputs.split(self.nvec, dim=-1)

    def logp(self, dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        import torch

        parts = [-torch.nn.functional.cross_entropy(logits, actions[:, k], reduction="none")
                 for k, logits in enumerate(self._split(dist_inputs))]
        return torch.stack(parts).sum(0)

    def entropy(self, dist_inputs: torch.Tensor) -> torch.Tensor:
        import torch

        parts = [torch.log_softmax(logits, dim=-1) for logits in self._split(dist_inputs)]
        return -torch.stack([(logp_all.exp() * logp_all).sum(-1) for logp_all in parts]).sum(0)


class DiagGaussian(ActionDistribution):
    def __init__(self, space: gym.spaces.Box) -> None:
        self.dims = int(np.prod(space.shape))
        self.shape = tuple(space.shape)
        self.low = space.low.reshape(-1).astype(np.float32)
        self.high = space.high.reshape(-1).astype(np.float32)
        self.size = 2 * self.dims
        self.layout = f"{self.size} numbers (the means of {self.dims} action dims, then their log-stds)"

    def sample(self, dist_inputs: np.ndarray, rng: np.random.Generator,
               explore: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mean, log_std = dist_inputs[:, :self.dims], dist_inputs[:, self.dims:]
        eps = rng.standard_normal(mean.shape, dtype=np.float32) if explore else np.zeros_like(mean)
        actions = (mean + np.exp(log_std) * eps).astype(np.float32, copy=False)
        env_actions = np.clip(actions, self.low, self.high).reshape((len(actions),) + self.shape)
        return env_actions, actions, gaussian_logp(eps, log_std)

    def actions_tensor(self, columns: torch.Tensor) -> torch.Tensor:
        return columns

    def logp(self, dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        import torch

        mean, log_std = dist_inputs[:, :self.dims], dist_inputs[:, self.dims:]
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std).sum(-1) - _LOG_SQRT_2PI * self.dims

    def entropy(self, dist_inputs: torch.Tensor) -> torch.Tensor:
        return (0.5 + _LOG_SQRT_2PI + dist_inputs[:, self.dims:]).sum(-1)


def action_distribution(space: gym.Space) -> ActionDistribution:
    """The distribution whose parameters a model outputs for ``space``; ValueError for other spaces."""
    if isinstance(space, gym.spaces.Discrete):
        return Categorical(space)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiCategorical(space)
    if isinstance(space, gym.spaces.Box):
        return DiagGaussian(space)
    raise ValueError(f"action space {space} is not supported (Discrete, MultiDiscrete or Box are)")

