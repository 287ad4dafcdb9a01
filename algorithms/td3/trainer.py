"""TD3 (Fujimoto, van Hoof, Meger 2018: twin critics, delayed policy updates, target policy
smoothing) and DDPG (Lillicrap et al. 2016) as its settings, as a trial that owns its rollout actors.

Read top to bottom: config and defaults, the deterministic actor (torch for the learner; its numpy
twin, what the rollout actors run, with Gaussian exploration noise), then the trainer: sample into
the replay buffer (``algorithms/core/off_policy.py``), learn from it. The critics are SAC's
(``algorithms/models/q_critics.py``).

    from algorithms import TD3
    trainer = TD3(config={"env": "Pendulum-v1"})
    result = trainer.train()

    from tuner import tune
    tune.run("TD3", config={"env": "Pendulum-v1", "lr": tune.loguniform(1e-4, 3e-3)},
             metric="episode_return_mean", mode="max", stop={"env_steps_total": 20_000})

``DDPG`` is TD3 with one critic, the actor updated after every critic update and no target
smoothing (SB3's DDPG is its TD3 with those settings too). Keys and defaults: docs/algorithms.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.core.common_config import check
from algorithms.core.learner_config import make_optimizer
from algorithms.core.off_policy import OFF_POLICY_DEFAULTS, OffPolicyTrainer
from algorithms.data.observations import Obs, ObsSpace, to_tensors
from algorithms.models.box_actor import (ActorCriticPolicy, BoxActions, box_action_layout, checked_module, first_output,
                                         network_options)
from algorithms.models.numpy_mlp import linear, linear_layers, mlp
from algorithms.models.q_critics import build_mlp_lazily, make_critic
from schedulers.validation import is_int, is_number

if TYPE_CHECKING:
    import torch

TD3_DEFAULTS: dict[str, Any] = {
    **OFF_POLICY_DEFAULTS,
    "lr": 1e-3,  # the actor's and the critics' (SB3's and RLlib's TD3)
    "train_batch_size": 256,
    "train_freq": 1,
    "gradient_steps": 1,
    "num_steps_sampled_before_learning_starts": 100,  # uniformly random actions until then
    "replay_buffer_config": {"capacity": 1_000_000},
    "tau": 0.005,  # the target networks move this far towards the learnt ones at every actor update
    "twin_q": True,  # the target is the smaller of two critics' estimates
    "policy_delay": 2,  # critic updates per actor (and target) update
    "smooth_target_policy": True,  # the target action gets clipped Gaussian noise
    "target_noise": 0.2,  # its std, in the actions' [-1, 1] range
    "target_noise_clip": 0.5,
    # exploration: Gaussian noise of this std on the actor's action, in the actions' [-1, 1] range
    "exploration_config": {"type": "GaussianNoise", "stddev": 0.1},
    # the built-in networks (shorthands of model={"hidden_sizes": ..., "activation": ...})
    "hidden_sizes": [400, 300],
    "activation": "relu",
}

#: DDPG: TD3 less its three changes.
DDPG_DEFAULTS: dict[str, Any] = {**TD3_DEFAULTS, "twin_q": False, "policy_delay": 1, "smooth_target_policy": False}

EXPLORATION_TYPES = ("GaussianNoise",)


# ---------------------------------------------------------------------------------------------
# The actor: torch for the learner, numpy for the rollout actors
# ---------------------------------------------------------------------------------------------
def make_actor(obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str) -> Any:
    """``body`` MLP, then the ``mu`` head; ``forward`` gives the action in [-1, 1] (tanh)."""
    from torch import nn

    class Actor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = build_mlp_lazily(obs_dim, hidden_sizes, activation)
            self.mu = nn.Linear(hidden_sizes[-1], act_dim)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return self.mu(self.body(obs)).tanh()

    return Actor()


def image_actor_model(observation_space: Any, action_space: Any, model_config: dict[str, Any]) -> Any:
    """The built-in actor for observations with images, as a module of the contract below (rollout
    actors run it in torch): the space's encoder, an MLP, and the pre-tanh actions."""
    from torch import nn

    from algorithms.models.encoders import Encoder

    encoder = Encoder(observation_space, model_config["cnn"])
    body = build_mlp_lazily(encoder.features, list(model_config["hidden_sizes"]), model_config["activation"])
    return nn.Sequential(encoder, body, nn.Linear(model_config["hidden_sizes"][-1], int(np.prod(action_space.shape))))


def make_module_actor(model: Any, model_config: dict[str, Any], observation_space: Any, action_space: Any) -> Any:
    """The user's module as the actor, checked once (before any sampling): ``forward(obs)`` returns
    the pre-tanh actions, shape (batch, action dims) (or ``(actions, value)``, the value unused),
    on observations shaped as the space's. The critics stay built-in MLPs."""
    from torch import nn

    act_dim = int(np.prod(action_space.shape))
    module = checked_module(
        model, model_config, observation_space, action_space, act_dim,
        f"a deterministic actor's forward(obs) must return actions of shape (batch, {act_dim}) for "
        f"{action_space} (or an (actions, value) pair)")

    class ModuleActor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = module

        def forward(self, obs: Any) -> torch.Tensor:
            """``obs``: the model's input (``ObsSpace.model_input``)."""
            return first_output(self.module(obs)).tanh()

    return ModuleActor()


class NumpyDeterministicActor(BoxActions):
    """The actor's actions in numpy, from its ``state_dict`` arrays (see ``BoxActions``):
    exploring, with Gaussian noise clipped back into [-1, 1]. ``load_weights`` takes the arrays,
    ``"__uniform__"`` (1 while actions are uniformly random) and ``"__stddev__"`` (the noise's std)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str,
                 low: np.ndarray, high: np.ndarray, action_shape: tuple[int, ...],
                 arrays: dict[str, np.ndarray] | None = None, observation_space: Any = None) -> None:
        super().__init__(act_dim, activation, low, high, action_shape, observation_space)
        self.stddev = 0.0
        if arrays is not None:
            self._use(arrays)

    def _use(self, arrays: dict[str, np.ndarray]) -> None:
        self._body = linear_layers(arrays, "body")
        self._mu = (arrays["mu.weight"], arrays["mu.bias"])

    def _load_flags(self, weights: dict[str, np.ndarray]) -> None:
        self.uniform = bool(np.asarray(weights["__uniform__"]))
        self.stddev = float(np.asarray(weights["__stddev__"]))

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        self._use({k: np.array(v) for k, v in weights.items() if not k.startswith("__")})  # Ray's are read-only
        self._load_flags(weights)

    def actions(self, obs: Obs) -> np.ndarray:
        """The actor's actions in [-1, 1], without noise."""
        return np.tanh(linear(mlp(self.flat(obs), self._body, self.activation), self._mu))

    def scaled(self, obs: Obs, rng: np.random.Generator, explore: bool) -> np.ndarray:
        scaled = self.actions(obs).astype(np.float32)
        if explore and self.stddev > 0:
            noise = rng.standard_normal(scaled.shape, dtype=np.float32)
            scaled = np.clip(scaled + self.stddev * noise, -1.0, 1.0)
        return scaled


def make_numpy_deterministic_actor(**kwargs: Any) -> NumpyDeterministicActor:
    """What a rollout actor calls to build its copy of the built-in actor (weights arrive with its
    first request)."""
    return NumpyDeterministicActor(**kwargs)


class TorchDeterministicActor(NumpyDeterministicActor):
    """:class:`NumpyDeterministicActor` whose actions come from an actor module run in torch (a
    module of one's own, or the built-in one on images); ``load_weights`` takes its ``state_dict``
    arrays."""

    def __init__(self, actor: Any, act_dim: int, low: np.ndarray, high: np.ndarray, action_shape: tuple[int, ...],
                 observation_space: Any, device: str = "cpu") -> None:
        super().__init__(obs_dim=0, act_dim=act_dim, hidden_sizes=[], activation="relu", low=low, high=high,
                         action_shape=action_shape)
        self.actor, self.device = actor, device
        self.obs_space = ObsSpace(observation_space)

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        from algorithms.models.torch_policy import load_state_arrays

        load_state_arrays(self.actor, {k: v for k, v in weights.items() if not k.startswith("__")})
        self._load_flags(weights)

    def actions(self, obs: Obs) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.actor(self.obs_space.model_input(to_tensors(obs, self.device))).float().cpu().numpy()


def make_torch_deterministic_actor(model: Any, model_config: dict[str, Any], observation_space: Any,
                                   action_space: Any, act_dim: int, low: np.ndarray, high: np.ndarray,
                                   action_shape: tuple[int, ...]) -> TorchDeterministicActor:
    """What a rollout actor calls to build its copy of a module actor, on CPU."""
    actor = make_module_actor(model, model_config, observation_space, action_space)
    return TorchDeterministicActor(actor, act_dim, low, high, action_shape, observation_space)


class TD3Policy(ActorCriticPolicy):
    """The learner's actor, critics and their targets (see ``ActorCriticPolicy``)."""

    def __init__(self, actor: Any, critic: Any, target_actor: Any, target_critic: Any,
                 numpy_kwargs: dict[str, Any], device: str, builtin: bool = True) -> None:
        super().__init__(actor, critic, numpy_kwargs, device, builtin)
        self.target_actor, self.target_critic = target_actor, target_critic
        bounds = {k: numpy_kwargs[k] for k in ("act_dim", "low", "high", "action_shape", "observation_space")}
        self._numpy = (NumpyDeterministicActor(**numpy_kwargs, arrays=self._arrays()) if builtin
                       else TorchDeterministicActor(actor, **bounds, device=device))

    def state_dict(self) -> dict[str, Any]:
        """The actor and the critics (their targets are the learner's state)."""
        return {**{f"actor.{k}": v for k, v in self.actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in self.critic.state_dict().items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("actor.")})
        self.critic.load_state_dict({k[7:]: v for k, v in state.items() if k.startswith("critic.")})
        self.refresh()

    def set_exploration(self, uniform: bool, stddev: float) -> None:
        self._numpy.uniform, self._numpy.stddev = uniform, stddev

    def get_weights(self) -> dict[str, np.ndarray]:
        if self.device != "cpu":
            self.refresh()
        return {**{k: np.array(v) for k, v in self._arrays().items()},
                "__uniform__": np.asarray(self._numpy.uniform, dtype=np.float32),
                "__stddev__": np.asarray(self._numpy.stddev, dtype=np.float32)}


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class TD3(OffPolicyTrainer):
    """TD3 for Box action spaces: twin critics, delayed actor and target updates, target policy
    smoothing, Gaussian exploration noise.

    A ``tune.Trainable``: ``tune.run("TD3", config={"env": ...})``. ``config["model"]``: the
    built-in networks' options, or ``model(observation_space, action_space, model_config) ->
    torch.nn.Module`` for the actor (see :func:`make_module_actor`; rollout actors then run it in
    torch). See ``TD3_DEFAULTS``, ``algorithms.core.off_policy.OFF_POLICY_DEFAULTS`` and
    ``algorithms.core.common_config.COMMON_DEFAULTS`` for the keys; ``learning_starts`` is accepted
    for ``num_steps_sampled_before_learning_starts``.
    """

    _name = "TD3"
    _defaults = TD3_DEFAULTS
    _rebuild_keys = OffPolicyTrainer._rebuild_keys + ("twin_q",)
    _model_defaults = {"hidden_sizes": [400, 300], "activation": "relu", "shared_layers": False}
    _takes_model_callable = True

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        check(is_number(c["tau"]) and 0 < c["tau"] <= 1, "tau", "must be in (0, 1]", c["tau"])
        for key in ("twin_q", "smooth_target_policy"):
            check(isinstance(c[key], bool), key, "must be True or False", c[key])
        check(is_int(c["policy_delay"]) and c["policy_delay"] >= 1, "policy_delay", "must be an int >= 1",
              c["policy_delay"])
        for key in ("target_noise", "target_noise_clip"):
            check(is_number(c[key]) and c[key] >= 0, key, "must be a number >= 0", c[key])
        exploration = c["exploration_config"]
        check(isinstance(exploration, dict) and set(exploration) <= {"type", "stddev"}, "exploration_config",
              "must be a dict with the keys 'type' and 'stddev'", exploration)
        check(exploration.get("type", "GaussianNoise") in EXPLORATION_TYPES, "exploration_config.type",
              f"must be one of {list(EXPLORATION_TYPES)}", exploration.get("type"))
        stddev = exploration.get("stddev", 0.1)
        check(is_number(stddev) and stddev >= 0, "exploration_config.stddev", "must be a number >= 0", stddev)

    # -- building ------------------------------------------------------------------------------
    def _numpy_kwargs(self, observation_space: Any, action_space: Any) -> dict[str, Any]:
        return box_action_layout(self._name, self.cfg, observation_space, action_space)

    def build_policy(self, observation_space: Any, action_space: Any) -> tuple[Any, Callable[..., Any], dict[str, Any]]:
        import torch

        c = self.cfg
        kwargs = self._numpy_kwargs(observation_space, action_space)
        sizes, model, model_config, critic_sizes = network_options(c, kwargs, observation_space, image_actor_model)

        def networks() -> tuple[Any, Any]:
            if callable(model):
                actor = make_module_actor(model, model_config, observation_space, action_space)
            else:
                actor = make_actor(**sizes)
            return actor.to(self.device), make_critic(**critic_sizes).to(self.device)

        with torch.random.fork_rng(devices=[]):  # seeded init, the global RNG left alone
            torch.manual_seed(self.seed)
            actor, critic = networks()
            target_actor, target_critic = networks()
        target_actor.load_state_dict(actor.state_dict())
        target_critic.load_state_dict(critic.state_dict())
        target_actor.requires_grad_(False)
        target_critic.requires_grad_(False)
        if callable(model):
            factory_kwargs = {"model": model, "model_config": model_config,
                              "observation_space": observation_space, "action_space": action_space,
                              **{k: kwargs[k] for k in ("act_dim", "low", "high", "action_shape")}}
            policy = TD3Policy(actor, critic, target_actor, target_critic, kwargs, str(self.device), builtin=False)
            return policy, make_torch_deterministic_actor, factory_kwargs
        policy = TD3Policy(actor, critic, target_actor, target_critic, kwargs, str(self.device))
        return policy, make_numpy_deterministic_actor, kwargs

    def build_optimizers(self) -> dict[str, Any]:
        c, policy = self.cfg, self.policy
        make = lambda params: make_optimizer(params, c["optimizer"], c["optimizer_config"], c["lr"])  # noqa: E731
        return {"actor": make(list(policy.actor.parameters())), "critic": make(list(policy.critic.parameters()))}

    def build_learner(self) -> None:
        super().build_learner()
        self.last_actor_loss: Any = float("nan")
        self.after_round()

    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        return (self.policy.numpy_kwargs["act_dim"],), np.float32

    # -- learning ------------------------------------------------------------------------------
    def update(self, batch: dict[str, Any]) -> dict[str, Any]:
        import torch

        c, policy = self.cfg, self.policy
        obs, next_obs = policy.critic_input(batch["obs"]), policy.critic_input(batch["next_obs"])
        actor_obs = obs if policy.builtin else policy.actor_input(batch["obs"])
        actor_next_obs = next_obs if policy.builtin else policy.actor_input(batch["next_obs"])
        # critics: towards the (smaller) target critic's value of the target actor's (smoothed) action
        with torch.no_grad():
            next_actions = policy.target_actor(actor_next_obs)
            if c["smooth_target_policy"]:
                noise = torch.randn(next_actions.shape, generator=self.torch_rng, device=next_actions.device)
                clip = float(c["target_noise_clip"])
                next_actions = (next_actions + (noise * float(c["target_noise"])).clamp(-clip, clip)).clamp(-1.0, 1.0)
            next_q = torch.stack(policy.target_critic(next_obs, next_actions)).min(0).values
            y = batch["rewards"] + batch["discounts"] * next_q
        qs = policy.critic(obs, batch["actions"])
        q_losses = [torch.nn.functional.mse_loss(q, y) for q in qs]
        critic_loss = sum(q_losses[1:], q_losses[0])
        self.step_optimizer("critic", critic_loss, policy.critic)
        # actor and targets: every policy_delay-th update (self.num_updates counts the updates before this one)
        if (self.num_updates + 1) % int(c["policy_delay"]) == 0:
            policy.critic.requires_grad_(False)  # its weights' gradients would be thrown away
            actor_loss = -policy.critic.first(obs, policy.actor(actor_obs)).mean()
            self.step_optimizer("actor", actor_loss, policy.actor)
            policy.critic.requires_grad_(True)
            tau = float(c["tau"])
            with torch.no_grad():
                for target, learnt in ((policy.target_critic, policy.critic), (policy.target_actor, policy.actor)):
                    for t, p in zip(target.parameters(), learnt.parameters()):
                        t.lerp_(p, tau)
            self.last_actor_loss = actor_loss.detach()
        return {"actor_loss": self.last_actor_loss, "critic_loss": critic_loss.detach(),
                "q_mean": qs[0].detach().mean()}

    def after_round(self) -> None:
        # uniformly random actions until learning starts, then the actor's with Gaussian noise
        uniform = self.env_steps_total < self.cfg["num_steps_sampled_before_learning_starts"]
        self.policy.set_exploration(uniform, float(self.cfg["exploration_config"].get("stddev", 0.1)))

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        super().reset_algorithm_config(old, new)
        self.after_round()

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        policy = self.policy
        return {**super().learner_state(),
                "target_actor": {k: v.cpu() for k, v in policy.target_actor.state_dict().items()},
                "target_critic": {k: v.cpu() for k, v in policy.target_critic.state_dict().items()}}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        super().load_learner_state(state)
        self.policy.target_actor.load_state_dict(state["target_actor"])
        self.policy.target_critic.load_state_dict(state["target_critic"])
        self.policy.refresh()
        self.after_round()


class DDPG(TD3):
    """DDPG: :class:`TD3` with one critic, the actor and targets updated after every critic update
    and no target smoothing (``DDPG_DEFAULTS``); any of TD3's keys may turn them back on."""

    _name = "DDPG"
    _defaults = DDPG_DEFAULTS
