"""What the actors of the continuous-action trainers (SAC, TD3, DDPG) share: the layout of a
bounded Box action space, a user's actor module checked once before sampling, and the learner's
side of an actor with critics (observations as each network takes them, the numpy twin that acts
in the learner's process). torch is imported inside: rollout actors import this module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.data.observations import Obs, ObsSpace, batch_of, batch_size, has_image, to_tensors, tree_map

if TYPE_CHECKING:
    import torch

__all__ = ["ActorCriticPolicy", "BoxActions", "box_action_layout", "checked_module", "first_output", "network_options"]


def box_action_layout(trainer: str, cfg: dict[str, Any], observation_space: Any, action_space: Any) -> dict[str, Any]:
    """The sizes and bounds the actor's numpy twin is built from (its ``numpy_kwargs``); a
    ValueError naming ``env`` unless the action space is a bounded Box. The built-in networks'
    sizes come from ``cfg["model"]``, or from the shorthands when a callable builds the actor."""
    import gymnasium as gym

    if not isinstance(action_space, gym.spaces.Box) or not (
            np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
        raise ValueError(f"config key 'env': {trainer} needs a bounded Box action space, this env has {action_space}")
    model = cfg["model"]
    sizes = model if not callable(model) else {"hidden_sizes": cfg["hidden_sizes"], "activation": cfg["activation"]}
    return {"obs_dim": ObsSpace(observation_space).flat_dim, "observation_space": observation_space,
            "act_dim": int(np.prod(action_space.shape)),
            "hidden_sizes": list(sizes["hidden_sizes"]), "activation": sizes["activation"],
            "low": action_space.low.reshape(-1).astype(np.float32),
            "high": action_space.high.reshape(-1).astype(np.float32), "action_shape": tuple(action_space.shape)}


def network_options(cfg: dict[str, Any], layout: dict[str, Any], observation_space: Any,
                    image_actor: Any) -> tuple[dict[str, Any], Any, dict[str, Any], dict[str, Any]]:
    """(the built-in actor's sizes, the actor's ``model``: options or a callable, its
    ``model_config``, the critics' options) from the config and ``box_action_layout``'s
    ``layout``. Observations with images make the built-in actor ``image_actor`` (a module: the
    space's encoder first, run in torch everywhere), and give the critics the space's encoder
    (they then take observations as the model contract gives them)."""
    sizes = {key: layout[key] for key in ("obs_dim", "act_dim", "hidden_sizes", "activation")}
    model, model_config = cfg["model"], dict(cfg["model_config"])
    cnn = model["cnn"] if not callable(model) else "auto"
    images = has_image(observation_space)
    if not callable(model) and images:
        model, model_config = image_actor, {"hidden_sizes": sizes["hidden_sizes"], "activation": sizes["activation"],
                                            "cnn": cnn}
    critics = {**sizes, "twin": cfg["twin_q"], "observation_space": observation_space if images else None, "cnn": cnn}
    return sizes, model, model_config, critics


def first_output(out: Any) -> Any:
    """A module's output, or the first of the outputs it returns (``(dist_inputs, value)``)."""
    return out[0] if isinstance(out, (tuple, list)) and out else out


def checked_module(model: Any, model_config: dict[str, Any], observation_space: Any, action_space: Any,
                   width: int, contract: str) -> Any:
    """``model(observation_space, action_space, model_config)``, run once on a batch of 2 sampled
    observations: its output (or the first of its outputs) must have shape (2, ``width``). A
    ValueError naming ``model`` says otherwise, with ``contract`` (what forward must return)."""
    import torch
    from torch import nn

    from algorithms.models.contract import _name

    where = f"config key 'model' ({_name(model)})"
    module = model(observation_space, action_space, dict(model_config))
    if not isinstance(module, nn.Module):
        raise ValueError(f"{where}: model(observation_space, action_space, model_config) must return a "
                         f"torch.nn.Module, got {type(module).__name__}")
    samples = ObsSpace(observation_space).model_input(
        to_tensors(batch_of(observation_space, [observation_space.sample() for _ in range(2)]), "cpu"))
    try:
        with torch.no_grad():
            out = first_output(module(samples))
    except Exception as exc:
        raise ValueError(f"{where}: forward failed on a batch of 2 observations of shape "
                         f"{tree_map(lambda leaf: tuple(leaf.shape), samples)}: "
                         f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, width):
        got = f"a tensor of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"{where}: {contract}; got {got} for a batch of 2")
    return module


class BoxActions:
    """An actor's twin that acts in [-1, 1] and hands the env its actions scaled to the bounds (what
    the rollout actors run). ``act`` returns the env's actions, the [-1, 1] actions (what the replay
    buffer keeps) and zeros for an on-policy learner's log-probabilities and values; while
    ``uniform`` (before learning starts) exploring actions are uniformly random, else a subclass's
    ``scaled`` gives them."""

    def __init__(self, act_dim: int, activation: str, low: np.ndarray, high: np.ndarray,
                 action_shape: tuple[int, ...], observation_space: Any = None) -> None:
        self.act_dim, self.activation, self.action_shape = act_dim, activation, tuple(action_shape)
        # Observations as the env gives them, flattened to float here (None: they come flat).
        self._flat = ObsSpace(observation_space).flat_numpy if observation_space is not None else None
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)
        self.uniform = True

    def flat(self, obs: Obs) -> np.ndarray:
        """A batch of observations as the built-in MLP takes it: flat float32."""
        return np.asarray(obs if self._flat is None else self._flat(obs), dtype=np.float32)

    def scaled(self, obs: Obs, rng: np.random.Generator, explore: bool) -> np.ndarray:
        """The actor's actions in [-1, 1], shape (batch, act_dim); with ``explore``, its exploring ones."""
        raise NotImplementedError

    def begin_fragment(self) -> None:
        """A new fragment starts: nothing to do (see ``algorithms.sampling.fragment.RolloutPolicy``)."""

    def act(self, obs: Obs, rng: np.random.Generator, explore: bool = True,
            new_noise: bool = False) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        n = batch_size(obs)
        if explore and self.uniform:
            scaled = rng.uniform(-1.0, 1.0, size=(n, self.act_dim)).astype(np.float32)
        else:
            scaled = self.scaled(obs, rng, explore)
        env_actions = (self.low + (scaled + 1) * 0.5 * (self.high - self.low)).reshape((n,) + self.action_shape)
        zeros = np.zeros(n, dtype=np.float32)
        return env_actions, scaled, zeros, zeros

    def value(self, obs: Obs) -> np.ndarray:
        return np.zeros(batch_size(obs), dtype=np.float32)


class ActorCriticPolicy:
    """The learner's actor and critics; acts (for in-process sampling) through ``self._numpy``, the
    actor's twin a subclass builds: numpy on the actor's parameters for the built-in actor (views on
    a CPU, a copy refreshed at every publication on a GPU), torch for a module."""

    _numpy: Any

    def __init__(self, actor: Any, critic: Any, numpy_kwargs: dict[str, Any], device: str, builtin: bool) -> None:
        self.actor, self.critic = actor, critic
        self.numpy_kwargs, self.device, self.builtin = numpy_kwargs, device, builtin
        self.obs_space = ObsSpace(numpy_kwargs["observation_space"])
        self.image_critics = has_image(numpy_kwargs["observation_space"])

    def critic_input(self, obs: Any) -> Any:
        """A batch of observations as the critics take it: as the model contract gives it when
        they encode images, else flattened."""
        return self.obs_space.model_input(obs) if self.image_critics else self.obs_space.flat_torch(obs)

    def actor_input(self, obs: Any) -> Any:
        """A batch of observations (tensors, the env's dtypes) as the actor takes it: flattened
        for the built-in MLP, as the model contract says for a module of one's own."""
        return self.obs_space.flat_torch(obs) if self.builtin else self.obs_space.model_input(obs)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {name: p.detach().cpu().numpy() for name, p in self.actor.state_dict().items()}

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.actor.parameters()

    def refresh(self) -> None:
        """The numpy twin's arrays from the actor's parameters (views of them on a CPU)."""
        if self.builtin:  # a module's twin runs the module itself
            self._numpy._use(self._arrays())

    def begin_fragment(self) -> None:
        """A new fragment starts: nothing to do (see ``algorithms.sampling.fragment.RolloutPolicy``)."""

    def act(self, obs: Obs, rng: np.random.Generator, explore: bool = True,
            new_noise: bool = False) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        return self._numpy.act(obs, rng, explore=explore)

    def value(self, obs: Obs) -> np.ndarray:
        return np.zeros(batch_size(obs), dtype=np.float32)
