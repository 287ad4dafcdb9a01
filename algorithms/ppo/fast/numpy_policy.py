"""The built-in actor-critic's rollout side in numpy alone: what a rollout actor runs.

A rollout actor only chooses actions, so it needs the network's forward pass and the action
distribution's sampling, not autograd. Doing both in numpy keeps torch out of the rollout actor's
process: importing torch costs a rollout actor more CPU than anything else in its start,
and a sweep starts many of them. For a 64-wide MLP numpy's calls are also cheaper than torch's
(``benchmarks/sampling.py`` prints both).

The layout is ``algorithms.ppo.model.ActorCritic``'s, and so are the weight names (its ``state_dict``
keys): separate policy and value MLPs stacked layer by layer, ``weights.k`` of shape (2, in, out)
and ``biases.k`` of shape (2, 1, out) (index 0 the policy, 1 the value function, whose output is
column 0 of the last layer), and for Box actions ``log_std``: one per action, or with gSDE one per
(last hidden feature, action).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from algorithms.models.distributions import gaussian_logp, sample_categorical
from algorithms.models.numpy_mlp import ACTIVATIONS
from algorithms.data.observations import ObsSpace


class NumpyActorCritic:
    """Actions, log-probabilities and values of the built-in actor-critic, in numpy.

    Discrete actions: a Categorical over the logits. Box actions: a diagonal Gaussian with a
    state-independent log std, or with ``sde=True`` gSDE (Raffin et al. 2021): the noise is
    ``phi(s) @ W`` for the policy's last hidden features ``phi(s)`` and ``W ~ N(0, exp(log_std)^2)``,
    drawn anew every ``sde_sample_freq`` steps and at each fragment's start. The env gets the action
    clipped to its bounds; the learner gets the unclipped one.

    ``arrays`` (name -> array, the layout above) are the weights; without them the arrays are
    allocated (zeros) and filled by :meth:`load_weights`. ``ActorCritic`` passes views of its own
    parameters, so its numpy inference always sees the current weights.
    """

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space,
        hidden_sizes: list[int],
        activation: str,
        sde: bool = False,
        sde_sample_freq: int = -1,
        arrays: Mapping[str, np.ndarray] | None = None,
        observation_space: gym.Space | None = None,
    ) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.observation_space = observation_space
        # Observations as the env gives them, flattened to float here (None: they come flat, float32).
        obs = ObsSpace(observation_space) if observation_space is not None else None
        self._flat = obs.flat_numpy if obs is not None and not obs.identity else None
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.sde, self.sde_sample_freq = sde, sde_sample_freq
        if isinstance(action_space, gym.spaces.Discrete):
            if sde:
                raise ValueError("config key 'use_sde': state-dependent exploration needs a Box action space")
            self.num_outputs = int(action_space.n)
            self._action_start = int(action_space.start)
        elif isinstance(action_space, gym.spaces.Box):
            self.num_outputs = int(np.prod(action_space.shape))
            self._action_shape = tuple(action_space.shape)
            self._low = action_space.low.reshape(-1).astype(np.float32)
            self._high = action_space.high.reshape(-1).astype(np.float32)
        else:
            raise ValueError(f"action space {action_space} is not supported (Discrete or Box are)")
        sizes = [obs_dim] + list(hidden_sizes) + [self.num_outputs]
        if arrays is None:
            shapes: dict[str, tuple[int, ...]] = {f"weights.{k}": (2, i, o) for k, (i, o) in enumerate(zip(sizes[:-1], sizes[1:]))}
            shapes.update({f"biases.{k}": (2, 1, o) for k, o in enumerate(sizes[1:])})
            if not self.discrete:
                shapes["log_std"] = (hidden_sizes[-1], self.num_outputs) if sde else (self.num_outputs,)
            arrays = {name: np.zeros(shape, dtype=np.float32) for name, shape in shapes.items()}
        self.arrays = dict(arrays)
        self._layers = [(self.arrays[f"weights.{k}"], self.arrays[f"biases.{k}"]) for k in range(len(sizes) - 1)]
        self._act_fn = ACTIVATIONS[activation]
        self._noise: np.ndarray | None = None  # gSDE exploration matrices, one per env
        self._noise_steps = 0

    # -- weights ---------------------------------------------------------------------------------
    def get_weights(self) -> dict[str, np.ndarray]:
        return dict(self.arrays)

    def reset_parameters(self, rng: np.random.Generator) -> None:
        """Orthogonal init as in SB3 and CleanRL (``ActorCritic.reset_parameters``' scheme, drawn
        with numpy, so a trainer has its first weights before it imports torch): sqrt(2) hidden,
        0.01 policy output, 1 value output, zero biases and log std."""
        layers = [self.arrays[f"weights.{k}"] for k in range(len(self._layers))]
        *hidden, out = layers
        for w in hidden:
            for k in range(2):
                w[k] = _orthogonal(rng, w[k].shape, math.sqrt(2))
        out[0] = _orthogonal(rng, out[0].shape, 0.01)
        out[1] = 0.0
        out[1, :, :1] = _orthogonal(rng, (out.shape[1], 1), 1.0)
        for name, array in self.arrays.items():
            if not name.startswith("weights."):
                array[...] = 0.0

    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Copy weights in place (they may be read-only views of Ray's object store)."""
        for name, array in self.arrays.items():
            np.copyto(array, weights[name])

    def flat_obs(self, obs: Any) -> np.ndarray:
        """A batch of observations as the env gave them, as this network's float input."""
        return np.asarray(obs) if self._flat is None else self._flat(obs)

    # -- the forward pass --------------------------------------------------------------------------
    def forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(policy outputs: logits or Gaussian means, values, the policy's last hidden features)."""
        *hidden, (w_out, b_out) = self._layers
        act_fn = self._act_fn
        h = obs if self._flat is None else self._flat(obs)
        for w, b in hidden:
            h = np.matmul(h, w)  # (batch, in) @ (2, in, out) -> (2, batch, out)
            h += b
            h = act_fn(h, out=h)
        out = np.matmul(h, w_out)
        out += b_out
        return out[0], out[1, :, 0], h[0]

    def value(self, obs: np.ndarray) -> np.ndarray:
        return self.forward(obs)[1]

    # -- acting ------------------------------------------------------------------------------------
    def act(
        self, obs: np.ndarray, rng: np.random.Generator, explore: bool = True, new_noise: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(env actions, actions, log-probabilities, values) for a batch of encoded observations;
        ``new_noise`` draws new gSDE exploration matrices first."""
        return self.act_on(*self.forward(obs), rng, explore=explore, new_noise=new_noise)

    def act_on(
        self, pi_out: np.ndarray, values: np.ndarray, features: np.ndarray, rng: np.random.Generator,
        explore: bool = True, new_noise: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`act` on the outputs of a forward pass made elsewhere (by torch, say)."""
        if self.discrete:
            actions, logp = sample_categorical(pi_out, rng, explore)
            return (actions + self._action_start if self._action_start else actions), actions, logp, values
        log_std_param = self.arrays["log_std"]
        if self.sde:
            std = np.sqrt(np.square(features) @ np.exp(2 * log_std_param) + 1e-6)
            if explore:
                noise = np.matmul(features[:, None, :], self._exploration_matrices(len(pi_out), rng, new_noise))[:, 0]
            else:
                noise = np.zeros_like(pi_out)
            eps = noise / std
            log_std = np.log(std)
        else:
            log_std = log_std_param
            eps = rng.standard_normal(pi_out.shape, dtype=np.float32) if explore else np.zeros_like(pi_out)
            noise = np.exp(log_std) * eps
        actions = pi_out + noise
        logp = gaussian_logp(eps, log_std)
        env_actions = np.clip(actions, self._low, self._high).reshape((len(pi_out),) + self._action_shape)
        return env_actions, actions, logp, values

    def begin_fragment(self) -> None:
        """Called by the rollout worker before each fragment: gSDE draws new noise then (SB3)."""
        self._noise_steps = 0

    def _exploration_matrices(self, n: int, rng: np.random.Generator, new: bool) -> np.ndarray:
        """gSDE's per-env W ~ N(0, exp(log_std)^2), redrawn every ``sde_sample_freq`` steps."""
        if new or self._noise is None or len(self._noise) != n or self._noise_steps == 0 or (
            self.sde_sample_freq > 0 and self._noise_steps % self.sde_sample_freq == 0
        ):
            std = np.exp(self.arrays["log_std"])
            self._noise = (rng.standard_normal((n,) + std.shape) * std).astype(np.float32)
        self._noise_steps += 1
        return self._noise


def _orthogonal(rng: np.random.Generator, shape: tuple[int, int], gain: float) -> np.ndarray:
    """A (semi-)orthogonal matrix times ``gain``, as ``torch.nn.init.orthogonal_`` draws one."""
    rows, cols = shape
    flat = rng.standard_normal((rows, cols) if rows >= cols else (cols, rows))
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    return (gain * (q if rows >= cols else q.T)).astype(np.float32)


def make_numpy_actor_critic(**kwargs: Any) -> NumpyActorCritic:
    """What a rollout actor calls to build its copy (weights arrive with its first request)."""
    return NumpyActorCritic(**kwargs)
