"""Soft Actor-Critic (Haarnoja et al. 2018, with the learned temperature of their second paper),
as a trial that owns its rollout actors.

Read top to bottom: config and defaults, the networks (a tanh-squashed Gaussian actor, in
``model.py``, and twin Q critics in torch, for the learner; the actor's numpy twin, what the
rollout actors run: they never import torch), then the trainer: sample into the replay buffer
(``algorithms/core/off_policy.py``), learn from it.

    from algorithms import SAC
    trainer = SAC(config={"env": "Pendulum-v1"})
    result = trainer.train()

    from tuner import tune
    tune.run("SAC", config={"env": "Pendulum-v1", "lr": tune.loguniform(1e-4, 3e-3)},
             metric="episode_return_mean", mode="max", stop={"env_steps_total": 20_000})

Its defaults, and why each: docs/algorithms.md (SAC).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.core.learner_config import make_optimizer
from algorithms.models.numpy_mlp import linear, linear_layers, mlp
from algorithms.models.box_actor import (ActorCriticPolicy, BoxActions, box_action_layout, network_options)
from algorithms.models.q_critics import build_mlp_lazily as _mlp, make_critic
from algorithms.data.observations import Obs, ObsSpace, to_tensors
from algorithms.core.off_policy import OFF_POLICY_DEFAULTS, OffPolicyTrainer
from algorithms.core.common_config import check
from algorithms.sac.model import LOG_STD_MAX, LOG_STD_MIN, make_actor, make_module_actor, squashed_sample
from schedulers.validation import is_number
from tuner.trainable.trainable import Trainable

if TYPE_CHECKING:
    import torch

SAC_DEFAULTS: dict[str, Any] = {
    **OFF_POLICY_DEFAULTS,
    "lr": 3e-4,  # the actor's, the critics' and the temperature's
    "train_batch_size": 256,
    "train_freq": 1,
    "gradient_steps": 1,
    "num_steps_sampled_before_learning_starts": 100,  # uniformly random actions until then
    "replay_buffer_config": {"capacity": 1_000_000},
    "tau": 0.005,  # the target critics move this far towards the critics after every update
    "initial_alpha": 1.0,
    "target_entropy": "auto",  # "auto": -(action dimensions); else a number
    "twin_q": True,
    # the built-in networks (shorthands of model={"hidden_sizes": ..., "activation": ...})
    "hidden_sizes": [256, 256],
    "activation": "relu",
}


# ---------------------------------------------------------------------------------------------
# The networks: torch for the learner (the actor and its squashed sample: model.py; the critics:
# algorithms/models/q_critics.py), the actor in numpy for the rollout actors
# ---------------------------------------------------------------------------------------------
def image_actor_model(observation_space: Any, action_space: Any, model_config: dict[str, Any]) -> Any:
    """The built-in actor for observations with images, as a module of the model contract
    (rollout actors run it in torch): the space's encoder, an MLP, and the pre-squash Gaussian's
    means and log stds (``dist_inputs``)."""
    from torch import nn

    from algorithms.models.encoders import Encoder

    encoder = Encoder(observation_space, model_config["cnn"])
    act_dim = int(np.prod(action_space.shape))
    body = _mlp(encoder.features, list(model_config["hidden_sizes"]), model_config["activation"])
    return nn.Sequential(encoder, body, nn.Linear(model_config["hidden_sizes"][-1], 2 * act_dim))


class NumpySquashedGaussian(BoxActions):
    """The actor's actions in numpy, from its ``state_dict`` arrays (see the module docstring and
    ``BoxActions``): exploring, the squashed Gaussian's samples, else its squashed mean.
    ``load_weights`` takes the arrays and ``"__uniform__"``: 1 while the trainer wants uniformly
    random actions (before learning starts)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str,
                 low: np.ndarray, high: np.ndarray, action_shape: tuple[int, ...],
                 arrays: dict[str, np.ndarray] | None = None, observation_space: Any = None) -> None:
        super().__init__(act_dim, activation, low, high, action_shape, observation_space)
        if arrays is not None:
            self._use(arrays)

    def _use(self, arrays: dict[str, np.ndarray]) -> None:
        self._body = linear_layers(arrays, "body")
        self._mean = (arrays["mean.weight"], arrays["mean.bias"])
        self._log_std = (arrays["log_std.weight"], arrays["log_std.bias"])

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        self._use({k: np.array(v) for k, v in weights.items() if k != "__uniform__"})  # Ray's are read-only
        self.uniform = bool(np.asarray(weights["__uniform__"]))

    def mean_log_std(self, obs: Obs) -> tuple[np.ndarray, np.ndarray]:
        """The pre-squash Gaussian's mean and (clamped) log std."""
        h = mlp(self.flat(obs), self._body, self.activation)
        return linear(h, self._mean), np.clip(linear(h, self._log_std), LOG_STD_MIN, LOG_STD_MAX)

    def scaled(self, obs: Obs, rng: np.random.Generator, explore: bool) -> np.ndarray:
        u, log_std = self.mean_log_std(obs)
        if explore:
            u = u + np.exp(log_std) * rng.standard_normal(u.shape, dtype=np.float32)
        return np.tanh(u)


def make_numpy_squashed_gaussian(**kwargs: Any) -> NumpySquashedGaussian:
    """What a rollout actor calls to build its copy of the built-in actor (weights arrive with its
    first request)."""
    return NumpySquashedGaussian(**kwargs)


# ---------------------------------------------------------------------------------------------
# An actor of one's own: config["model"] = model(observation_space, action_space, model_config)
# (model.py's make_module_actor), run in torch by the rollout actors
# ---------------------------------------------------------------------------------------------
class TorchSquashedGaussian(NumpySquashedGaussian):
    """:class:`NumpySquashedGaussian` whose Gaussian comes from an actor module run in torch
    (a module of one's own); ``load_weights`` takes its ``state_dict`` arrays."""

    def __init__(self, actor: Any, act_dim: int, low: np.ndarray, high: np.ndarray, action_shape: tuple[int, ...],
                 observation_space: Any, device: str = "cpu") -> None:
        super().__init__(obs_dim=0, act_dim=act_dim, hidden_sizes=[], activation="relu", low=low, high=high,
                         action_shape=action_shape)
        self.actor, self.device = actor, device
        self.obs_space = ObsSpace(observation_space)

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        from algorithms.models.torch_policy import load_state_arrays

        load_state_arrays(self.actor, {k: v for k, v in weights.items() if k != "__uniform__"})
        self.uniform = bool(np.asarray(weights["__uniform__"]))

    def mean_log_std(self, obs: Obs) -> tuple[np.ndarray, np.ndarray]:
        import torch

        with torch.no_grad():
            mean, log_std = self.actor(self.obs_space.model_input(to_tensors(obs, self.device)))
        return mean.float().cpu().numpy(), log_std.float().cpu().numpy()


def make_torch_squashed_gaussian(model: Any, model_config: dict[str, Any], observation_space: Any, action_space: Any,
                                 act_dim: int, low: np.ndarray, high: np.ndarray, action_shape: tuple[int, ...]
                                 ) -> TorchSquashedGaussian:
    """What a rollout actor calls to build its copy of an actor of one's own, on CPU."""
    actor = make_module_actor(model, model_config, observation_space, action_space)
    return TorchSquashedGaussian(actor, act_dim, low, high, action_shape, observation_space)


class SACPolicy(ActorCriticPolicy):
    """The learner's actor, critics, target critics and temperature (see ``ActorCriticPolicy``)."""

    def __init__(self, actor: Any, critic: Any, target: Any, log_alpha: Any, numpy_kwargs: dict[str, Any],
                 device: str, builtin: bool = True) -> None:
        super().__init__(actor, critic, numpy_kwargs, device, builtin)
        self.target, self.log_alpha = target, log_alpha
        bounds = {k: numpy_kwargs[k] for k in ("act_dim", "low", "high", "action_shape", "observation_space")}
        self._numpy = (NumpySquashedGaussian(**numpy_kwargs, arrays=self._arrays()) if builtin
                       else TorchSquashedGaussian(actor, **bounds, device=device))

    def state_dict(self) -> dict[str, Any]:
        """Everything but the target critics (the learner's state): actor, critics, temperature."""
        return {**{f"actor.{k}": v for k, v in self.actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in self.critic.state_dict().items()},
                "log_alpha": self.log_alpha.detach()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import torch

        self.actor.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("actor.")})
        self.critic.load_state_dict({k[7:]: v for k, v in state.items() if k.startswith("critic.")})
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.refresh()

    def set_uniform(self, uniform: bool) -> None:
        self._numpy.uniform = uniform

    def get_weights(self) -> dict[str, np.ndarray]:
        if self.device != "cpu":
            self.refresh()
        return {**{k: np.array(v) for k, v in self._arrays().items()},
                "__uniform__": np.asarray(self._numpy.uniform, dtype=np.float32)}


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class SAC(OffPolicyTrainer):
    """SAC with twin Q critics, target critics and a learned temperature, for Box action spaces.

    A ``tune.Trainable``: ``tune.run("SAC", config={"env": ...})``. ``config["model"]``: the
    built-in networks' options, or ``model(observation_space, action_space, model_config) ->
    torch.nn.Module`` for the actor (see :func:`make_module_actor`; rollout actors then run it in
    torch). See ``SAC_DEFAULTS``,
    ``algorithms.core.off_policy.OFF_POLICY_DEFAULTS`` and ``algorithms.core.common_config.COMMON_DEFAULTS`` for
    the keys; ``learning_starts`` is accepted for ``num_steps_sampled_before_learning_starts``.
    """

    _name = "SAC"
    _defaults = SAC_DEFAULTS
    _rebuild_keys = OffPolicyTrainer._rebuild_keys + ("twin_q",)
    _model_defaults = {"hidden_sizes": [256, 256], "activation": "relu", "shared_layers": False}
    _takes_model_callable = True

    # -- packed trials (algorithms/sac/packed.py) -----------------------------------------------
    @classmethod
    def pack_signature(cls, config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
        from algorithms.sac.packed import pack_signature

        return pack_signature(cls, config)

    @classmethod
    def pack_shape_keys(cls) -> tuple[str, ...]:
        from algorithms.sac.population import SIGNATURE

        return tuple(SIGNATURE)

    @classmethod
    def packed_trainable(cls) -> type[Trainable] | None:
        from algorithms.sac.packed import PackedSAC

        return PackedSAC if cls is SAC else None  # a subclass may change what a member would do

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        check(is_number(c["tau"]) and 0 < c["tau"] <= 1, "tau", "must be in (0, 1]", c["tau"])
        check(is_number(c["initial_alpha"]) and c["initial_alpha"] > 0, "initial_alpha", "must be a number > 0",
              c["initial_alpha"])
        check(c["target_entropy"] == "auto" or is_number(c["target_entropy"]), "target_entropy",
              "must be 'auto' (minus the action dimensions) or a number", c["target_entropy"])
        check(isinstance(c["twin_q"], bool), "twin_q", "must be True or False", c["twin_q"])

    # -- building ------------------------------------------------------------------------------
    def _numpy_kwargs(self, observation_space: Any, action_space: Any) -> dict[str, Any]:
        return box_action_layout(self._name, self.cfg, observation_space, action_space)

    def build_policy(self, observation_space: Any, action_space: Any) -> tuple[Any, Callable[..., Any], dict[str, Any]]:
        import torch

        c = self.cfg
        kwargs = self._numpy_kwargs(observation_space, action_space)
        sizes, model, model_config, critic_sizes = network_options(c, kwargs, observation_space, image_actor_model)
        with torch.random.fork_rng(devices=[]):  # seeded init, the global RNG left alone
            torch.manual_seed(self.seed)
            if callable(model):
                actor = make_module_actor(model, model_config, observation_space, action_space).to(self.device)
            else:
                actor = make_actor(**sizes).to(self.device)
            critic = make_critic(**critic_sizes).to(self.device)
        target = make_critic(**critic_sizes).to(self.device)
        target.load_state_dict(critic.state_dict())
        target.requires_grad_(False)
        log_alpha = torch.tensor(math.log(c["initial_alpha"]), device=self.device, requires_grad=True)
        self.target_entropy = -float(kwargs["act_dim"]) if c["target_entropy"] == "auto" else float(c["target_entropy"])
        if callable(model):
            factory_kwargs = {"model": model, "model_config": model_config,
                              "observation_space": observation_space, "action_space": action_space,
                              **{k: kwargs[k] for k in ("act_dim", "low", "high", "action_shape")}}
            policy = SACPolicy(actor, critic, target, log_alpha, kwargs, str(self.device), builtin=False)
            return policy, make_torch_squashed_gaussian, factory_kwargs
        return SACPolicy(actor, critic, target, log_alpha, kwargs, str(self.device)), make_numpy_squashed_gaussian, kwargs

    def build_optimizers(self) -> dict[str, Any]:
        c, policy = self.cfg, self.policy
        make = lambda params: make_optimizer(params, c["optimizer"], c["optimizer_config"], c["lr"])  # noqa: E731
        return {"actor": make(list(policy.actor.parameters())), "critic": make(list(policy.critic.parameters())),
                "alpha": make([policy.log_alpha])}

    def build_learner(self) -> None:
        super().build_learner()
        self.after_round()

    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        return (self.policy.numpy_kwargs["act_dim"],), np.float32

    # -- learning ------------------------------------------------------------------------------
    def _sample_actions(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        mean, log_std = self.policy.actor(obs)
        noise = torch.randn(mean.shape, generator=self.torch_rng, device=mean.device)
        return squashed_sample(mean, log_std, noise)

    def update(self, batch: dict[str, Any]) -> dict[str, Any]:
        import torch

        policy, optimizers = self.policy, self.optimizers
        actions = batch["actions"]
        # the observations as the critics read them, and as the actor does
        obs, next_obs = policy.critic_input(batch["obs"]), policy.critic_input(batch["next_obs"])
        actor_obs = obs if policy.builtin else policy.actor_input(batch["obs"])
        actor_next_obs = next_obs if policy.builtin else policy.actor_input(batch["next_obs"])
        # temperature: towards the target entropy (this update's losses use it as it was before)
        pi_actions, logp = self._sample_actions(actor_obs)
        alpha = policy.log_alpha.detach().exp()
        alpha_loss = -(policy.log_alpha * (logp.detach() + self.target_entropy)).mean()
        optimizers["alpha"].zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.optimizer_steps["alpha"]()
        # critics: towards the soft Bellman target of the target critics
        with torch.no_grad():
            next_actions, next_logp = self._sample_actions(actor_next_obs)
            next_q = torch.stack(policy.target(next_obs, next_actions)).min(0).values
            y = batch["rewards"] + batch["discounts"] * (next_q - alpha * next_logp)
        qs = policy.critic(obs, actions)
        q_losses = [torch.nn.functional.mse_loss(q, y) for q in qs]
        critic_loss = 0.5 * sum(q_losses[1:], q_losses[0])
        self.step_optimizer("critic", critic_loss, policy.critic)
        # actor: the soft policy improvement step, through the updated critics (held fixed: their
        # weights' gradients would be thrown away, and they are a third of the update's work)
        policy.critic.requires_grad_(False)
        q_pi = torch.stack(policy.critic(obs, pi_actions)).min(0).values
        actor_loss = (alpha * logp - q_pi).mean()
        self.step_optimizer("actor", actor_loss, policy.actor)
        policy.critic.requires_grad_(True)
        with torch.no_grad():
            for t, p in zip(policy.target.parameters(), policy.critic.parameters()):
                t.lerp_(p, self.cfg["tau"])
        return {"actor_loss": actor_loss.detach(), "critic_loss": critic_loss.detach(),
                "alpha_loss": alpha_loss.detach(), "alpha": alpha, "q_mean": qs[0].detach().mean(),
                "entropy": -logp.detach().mean()}

    def after_round(self) -> None:
        # uniformly random actions until learning starts (SB3's learning_starts)
        self.policy.set_uniform(self.env_steps_total < self.cfg["num_steps_sampled_before_learning_starts"])

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        return {**super().learner_state(), "target": {k: v.cpu() for k, v in self.policy.target.state_dict().items()}}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        super().load_learner_state(state)
        self.policy.target.load_state_dict(state["target"])
        self.policy.refresh()
        self.after_round()
