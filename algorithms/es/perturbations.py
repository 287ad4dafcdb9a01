"""What ES and ARS share: a policy whose parameters are one flat vector, a table of Gaussian
noise the learner and every rollout actor read the same directions from, and the episodes of
a population of perturbed parameters, played by a rollout actor with its own envs.

A direction is an index into the noise table: ``eps = table[i : i + dim]``. The learner sends
the parameters ``theta``, the noise's scale ``sigma`` and the indices; the actor plays one episode
with ``theta + sigma eps`` and one with ``theta - sigma eps`` per index (antithetic pairs) and
returns their returns and lengths, so what crosses Ray is a few numbers per episode, never a
perturbed network. The table is made once per trial from its seed (``NoiseTable``) and put in
Ray's object store: every actor on a node maps the same memory.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from algorithms.data.observations import ObsSpace, batch_size
from algorithms.models.numpy_mlp import mlp

__all__ = ["FlatPolicy", "NoiseTable", "centered_ranks", "make_flat_policy", "play_perturbations"]


class NoiseTable:
    """``size`` float32 draws of N(0, 1) from ``seed``: direction ``i`` is ``noise[i : i + dim]``."""

    def __init__(self, seed: int, size: int) -> None:
        self.noise = np.random.default_rng([seed, 7]).standard_normal(size, dtype=np.float32)

    def sample_index(self, rng: np.random.Generator, dim: int, count: int) -> np.ndarray:
        """``count`` directions' start indices, drawn uniformly where a whole direction fits."""
        return rng.integers(0, len(self.noise) - dim + 1, size=count)

    def get(self, index: int, dim: int) -> np.ndarray:
        return self.noise[index:index + dim]


def centered_ranks(returns: np.ndarray) -> np.ndarray:
    """The returns' ranks scaled to [-0.5, 0.5] (OpenAI-ES's fitness shaping: the update sees
    orderings, not magnitudes, so one outlying episode does not swing it)."""
    flat = returns.ravel()
    ranks = np.empty(len(flat), dtype=np.float32)
    ranks[flat.argsort(kind="stable")] = np.arange(len(flat), dtype=np.float32)
    scaled = ranks / (len(flat) - 1) - 0.5 if len(flat) > 1 else np.zeros_like(ranks)
    return scaled.reshape(returns.shape).astype(np.float32)


class FlatPolicy:
    """A deterministic MLP (``hidden_sizes`` with ``activation``; none: a linear policy) whose
    parameters are one flat float32 vector, acting in numpy: Discrete actions are the argmax of
    its outputs, Box actions its outputs clipped to the space's bounds, plus Gaussian noise of
    ``action_noise_std`` when exploring (ES's). A rollout worker's policy (see
    ``algorithms.sampling.fragment.RolloutPolicy``); ``load_weights`` takes ``{"theta": vector}``."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, hidden_sizes: list[int],
                 activation: str, action_noise_std: float = 0.0) -> None:
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise ValueError(f"config key 'env': ES and ARS take a Discrete or Box action space, this env has {action_space}")
        self.obs_space = ObsSpace(observation_space)
        self.action_space: Any = action_space
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        outputs = int(action_space.n) if isinstance(action_space, gym.spaces.Discrete) else int(np.prod(action_space.shape))
        sizes = [self.obs_space.flat_dim, *hidden_sizes, outputs]
        self.shapes = [(n_in, n_out) for n_in, n_out in zip(sizes, sizes[1:])]
        self.dim = sum(n_in * n_out + n_out for n_in, n_out in self.shapes)
        self.activation, self.action_noise_std = activation, float(action_noise_std)
        self.theta = np.zeros(self.dim, dtype=np.float32)

    def initial_theta(self, rng: np.random.Generator) -> np.ndarray:
        """Weights scaled by 1 / sqrt(fan-in) (the last layer by 0.01 of that: actions start
        near the middle), biases 0."""
        parts = []
        for i, (n_in, n_out) in enumerate(self.shapes):
            scale = (0.01 if i == len(self.shapes) - 1 else 1.0) / np.sqrt(n_in)
            parts += [rng.standard_normal(n_in * n_out).astype(np.float32) * scale, np.zeros(n_out, np.float32)]
        return np.concatenate(parts)

    def layers(self, theta: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``theta`` as (weight (in, out), bias) pairs: views, no copies."""
        out, at = [], 0
        for n_in, n_out in self.shapes:
            w = theta[at:at + n_in * n_out].reshape(n_in, n_out)
            at += n_in * n_out
            out.append((w, theta[at:at + n_out]))
            at += n_out
        return out

    def outputs(self, flat_obs: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        return mlp(flat_obs, [(w.T, b) for w, b in layers[:-1]], self.activation) @ layers[-1][0] + layers[-1][1]

    def actions(self, out: np.ndarray, rng: np.random.Generator, explore: bool) -> np.ndarray:
        if self.discrete:
            return out.argmax(-1) + int(self.action_space.start)
        if explore and self.action_noise_std > 0:
            out = out + rng.normal(scale=self.action_noise_std, size=out.shape).astype(np.float32)
        return np.clip(out, self.action_space.low, self.action_space.high).reshape((len(out),) + self.action_space.shape)

    # -- the rollout policy's interface --------------------------------------------------------
    def act(self, obs: Any, rng: np.random.Generator, explore: bool = True,
            new_noise: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        flat = self.obs_space.flat_numpy(obs)
        actions = self.actions(self.outputs(flat, self.layers(self.theta)), rng, explore)
        zeros = np.zeros(batch_size(obs), dtype=np.float32)
        return actions, actions, zeros, zeros

    def value(self, obs: Any) -> np.ndarray:
        return np.zeros(batch_size(obs), dtype=np.float32)

    def begin_fragment(self) -> None:
        """Nothing to do (see ``algorithms.sampling.fragment.RolloutPolicy``)."""

    def get_weights(self) -> dict[str, np.ndarray]:
        return {"theta": self.theta.copy()}

    def load_weights(self, weights: Mapping[str, Any]) -> None:
        np.copyto(self.theta, np.asarray(weights["theta"], dtype=np.float32))

    # -- as a checkpoint holds it (torch tensors) ------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"theta": torch.from_numpy(self.theta.copy())}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        np.copyto(self.theta, state["theta"].numpy())


def make_flat_policy(**kwargs: Any) -> FlatPolicy:
    """What a rollout actor calls to build its copy (parameters arrive with the weights)."""
    return FlatPolicy(**kwargs)


def play_perturbations(worker: Any, theta: np.ndarray, indices: np.ndarray, sigma: float, noise: Any,
                       filter_state: Mapping[str, Any] | None = None, explore: bool = True) -> dict[str, Any]:
    """Run on a rollout worker (``RolloutWorker.apply``): for each direction index, one episode
    with ``theta + sigma eps`` and one with ``theta - sigma eps``, its envs playing episodes side
    by side (each env takes the next episode when its last ends), observations normalised with
    the learner's ``filter_state`` (and counted). Returns ``returns`` and ``lengths`` of shape
    (directions, 2) (+, -), the env ``steps`` taken (idle envs' steps too: a worker's envs step
    together) and the normalisation statistics counted (``filter_delta``)."""
    if type(noise).__name__ == "ObjectRef":
        import ray

        noise = ray.get(noise)
    policy: FlatPolicy = worker.policy
    envs, rng, norm = worker.envs, worker.rng, worker.normalizer
    if norm is not None and filter_state is not None:
        norm.sync(filter_state)
    theta = np.asarray(theta, dtype=np.float32)
    queue = [(j, sign) for j in range(len(indices)) for sign in (0, 1)]
    queue.reverse()
    returns = np.zeros((len(indices), 2))
    lengths = np.zeros((len(indices), 2), dtype=np.int64)
    num_envs = worker.num_envs
    playing: list[tuple[int, int] | None] = [None] * num_envs
    layers: list[Any] = [None] * num_envs

    def assign(k: int) -> None:
        episode = playing[k] = queue.pop() if queue else None
        if episode is not None:
            j, sign = episode
            eps = noise[indices[j]:indices[j] + policy.dim]
            layers[k] = policy.layers(theta + (sigma if sign == 0 else -sigma) * eps)

    obs, _ = envs.reset()
    obs = worker.obs_space.stored(obs)
    for k in range(num_envs):
        assign(k)
    steps = 0
    resetting = np.zeros(num_envs, dtype=bool)
    while any(p is not None for p in playing):
        if norm is not None:
            obs = norm.observe(obs)
        flat = policy.obs_space.flat_numpy(obs)
        actions = np.stack([policy.actions(policy.outputs(flat[k:k + 1], layers[k] or policy.layers(theta)), rng, explore)[0]
                            for k in range(num_envs)])
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        obs = worker.obs_space.stored(obs)
        steps += num_envs
        for k in range(num_envs):
            if resetting[k]:  # NEXT_STEP autoreset: this step was the env's reset, its next episode starts here
                resetting[k] = False
                continue
            if playing[k] is None:
                continue
            j, sign = playing[k]  # type: ignore[misc]  # not None: checked above
            returns[j, sign] += float(rewards[k])
            lengths[j, sign] += 1
            if terminated[k] or truncated[k]:
                resetting[k] = True
                assign(k)
    return {"returns": returns, "lengths": lengths, "steps": steps,
            "filter_delta": None if norm is None else norm.take_delta()}
