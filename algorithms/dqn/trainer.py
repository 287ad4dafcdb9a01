"""Deep Q-Networks (Mnih et al. 2015), with double Q, dueling heads and n-step returns, as a
trial that owns its rollout actors (Ape-X's layout: Horgan et al. 2018).

Read top to bottom: config and defaults, the Q network's numpy twin (epsilon-greedy, what the
rollout actors run: they never import torch; the network itself, in torch for the learner, is in
``model.py``), then the trainer:
sample into the replay buffer, learn from it, keep the target network behind.

    from algorithms import DQN
    trainer = DQN(config={"env": "CartPole-v1"})
    result = trainer.train()   # >= min_sample_timesteps_per_iteration env steps, and the updates due

    from tuner import tune
    tune.run("DQN", config={"env": "CartPole-v1", "lr": tune.loguniform(1e-4, 3e-3)},
             metric="episode_return_mean", mode="max", stop={"env_steps_total": 100_000})

Its defaults, and why each: docs/algorithms.md (DQN).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from algorithms.core.learner_config import make_optimizer
from algorithms.models.numpy_mlp import linear, linear_layers, mlp
from algorithms.data.observations import Obs, ObsSpace, batch_size, to_tensors
from algorithms.core.off_policy import OFF_POLICY_DEFAULTS, OffPolicyTrainer, schedule_points
from algorithms.core.common_config import check
from algorithms.dqn.model import build_q_module, make_q_network
from algorithms.data.prioritized_replay import PrioritizedReplayBuffer
from algorithms.data.replay_buffer import ReplayBuffer
from schedulers.validation import is_int, is_number
from tuner.trainable.trainable import Trainable

if TYPE_CHECKING:
    import torch

# torch is imported where the learner needs it, never at this module's import (the driver and
# the rollout actors import it).

DQN_DEFAULTS: dict[str, Any] = {
    **OFF_POLICY_DEFAULTS,
    "lr": 5e-4,
    # 128 replayed transitions per update (CleanRL's and Dopamine's value for classic control): at
    # one update per 4 env steps each transition is replayed 32 times in all rather than 8, for little
    # more CPU per update on an MLP, where an update's cost is mostly fixed overhead (a CNN's grows
    # with the batch: image envs may want 32, the Nature DQN's); the sweep behind the choice:
    # examples/dqn_defaults_sweep.py.
    "train_batch_size": 128,
    "max_grad_norm": 40.0,  # RLlib's grad_clip
    "target_network_update_freq": 500,  # env steps between two target updates
    "tau": 1.0,  # 1.0: copy; < 1: Polyak averaging at each target update
    "double_q": True,
    "dueling": True,
    "epsilon": [[0, 1.0], [10_000, 0.05]],  # [[env_steps, epsilon], ...], interpolated
    # 3-step targets (Rainbow's and Dopamine's horizon; RLlib's tuned CartPole example draws 2-5):
    # a reward reaches the state three steps back in one update, so values spread three times as
    # far per update, which a learner making one update per 4 env steps needs (the sweep behind the
    # choice: examples/dqn_defaults_sweep.py). SAC keeps 1-step targets (OFF_POLICY_DEFAULTS).
    "n_step": 3,
    "per_worker_exploration": True,  # Ape-X: rollout actor i of N explores with epsilon ** (1 + 7 (i-1)/(N-1))
    # prioritized replay (Schaul et al. 2016, proportional; RLlib's keys and defaults): transitions
    # drawn in proportion to |TD error| ** alpha, each update weighted by (N P(i)) ** -beta
    "prioritized_replay": False,
    "prioritized_replay_alpha": 0.6,
    "prioritized_replay_beta": 0.4,
    "prioritized_replay_eps": 1e-6,
    # the built-in network (shorthands of model={"hidden_sizes": ..., "activation": ...})
    "hidden_sizes": [256, 256],
    "activation": "relu",
}

# ---------------------------------------------------------------------------------------------
# The Q network: torch for the learner (make_q_network: model.py), numpy for the rollout actors
# ---------------------------------------------------------------------------------------------
def image_q_model(observation_space: Any, action_space: Any, model_config: dict[str, Any]) -> Any:
    """The built-in Q network for observations with images, as a module of the model contract
    (rollout actors run it in torch): the space's encoder (a CNN per image:
    ``algorithms/models/encoders.py``), then :func:`make_q_network`'s layers on its features."""
    from torch import nn

    from algorithms.models.encoders import Encoder

    encoder = Encoder(observation_space, model_config["cnn"])
    head = make_q_network(encoder.features, int(action_space.n), list(model_config["hidden_sizes"]),
                          model_config["activation"], bool(model_config["dueling"]))
    return nn.Sequential(encoder, head)


class EpsilonGreedyQ:
    """Epsilon-greedy acting on a Q network's ``q_values`` (numpy out), as a rollout worker's
    policy: ``act`` returns the actions and, for an on-policy learner's log-probabilities and
    values, zeros. ``load_weights`` takes ``"__epsilon__"`` with the arrays: one epsilon per
    worker index. With ``record_action_values`` (Ape-X's actors) ``act`` also keeps Q(obs,
    action) of the actions chosen in ``action_values`` and returns max_a Q(obs, a) as the
    values, and ``value`` returns it too: what their transitions' first priorities are made of
    (``algorithms.data.replay_buffer.transitions``)."""

    action_start = 0
    worker_index = 0
    epsilon = 1.0
    record_action_values = False
    action_values: np.ndarray

    def q_values(self, obs: Obs) -> np.ndarray:
        raise NotImplementedError

    def bind_worker(self, worker_index: int) -> None:
        self.worker_index = worker_index

    def _take_epsilon(self, weights: dict[str, Any]) -> None:
        epsilons = np.asarray(weights["__epsilon__"])
        self.epsilon = float(epsilons[min(self.worker_index, len(epsilons) - 1)])

    def begin_fragment(self) -> None:
        """A new fragment starts: nothing to do (see ``algorithms.sampling.fragment.RolloutPolicy``)."""

    def act(self, obs: Obs, rng: np.random.Generator, explore: bool = True,
            new_noise: bool = False) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        q = self.q_values(obs)
        env_actions, actions, logp, values = epsilon_greedy(q, self.epsilon if explore else 0.0, rng, self.action_start)
        if self.record_action_values:
            self.action_values = q[np.arange(len(actions)), actions].astype(np.float32)
            values = q.max(-1).astype(np.float32)
        return env_actions, actions, logp, values

    def value(self, obs: Obs) -> np.ndarray:
        if self.record_action_values:
            return self.q_values(obs).max(-1).astype(np.float32)
        return np.zeros(batch_size(obs), dtype=np.float32)


class NumpyQPolicy(EpsilonGreedyQ):
    """Epsilon-greedy actions of a Q network given as ``state_dict`` arrays, in numpy (see
    :class:`EpsilonGreedyQ`)."""

    def __init__(self, obs_dim: int, num_actions: int, hidden_sizes: list[int], activation: str, dueling: bool,
                 action_start: int = 0, arrays: dict[str, np.ndarray] | None = None,
                 observation_space: Any = None, record_action_values: bool = False) -> None:
        self.num_actions, self.activation, self.dueling = num_actions, activation, dueling
        # Observations as the env gives them, flattened to float here (None: they come flat).
        self._flat = ObsSpace(observation_space).flat_numpy if observation_space is not None else None
        self.action_start = action_start
        self.record_action_values = record_action_values
        self.arrays: dict[str, np.ndarray] = {}
        if arrays is not None:
            self._use(arrays)

    def _use(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays
        self._body = linear_layers(arrays, "body")
        self._advantages = (arrays["advantages.weight"], arrays["advantages.bias"])
        self._value = (arrays["value.weight"], arrays["value.bias"]) if self.dueling else None

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        arrays = {k: np.array(v) for k, v in weights.items() if k != "__epsilon__"}  # Ray's arrays are read-only
        self._use(arrays)
        self._take_epsilon(weights)

    def q_values(self, obs: Obs) -> np.ndarray:
        flat = obs if self._flat is None else self._flat(obs)
        h = mlp(np.asarray(flat, dtype=np.float32), self._body, self.activation)
        a = linear(h, self._advantages)
        if self._value is None:
            return a
        return linear(h, self._value) + a - a.mean(-1, keepdims=True)


def epsilon_greedy(q: np.ndarray, epsilon: float, rng: np.random.Generator,
                   action_start: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(env actions, actions, zeros, zeros): the argmax of ``q``, or with probability ``epsilon`` a
    uniformly random action (the zeros stand for an on-policy learner's log-probabilities and values)."""
    actions = q.argmax(-1)
    if epsilon > 0:
        random = rng.random(len(actions)) < epsilon
        actions = np.where(random, rng.integers(0, q.shape[-1], len(actions)), actions)
    zeros = np.zeros(len(actions), dtype=np.float32)
    return actions + action_start, actions, zeros, zeros


def make_numpy_q_policy(**kwargs: Any) -> NumpyQPolicy:
    """What a rollout actor calls to build its copy of the built-in network (weights arrive with
    its first request)."""
    return NumpyQPolicy(**kwargs)


# ---------------------------------------------------------------------------------------------
# A Q module of one's own: config["model"] = model(observation_space, action_space, model_config),
# checked by model.py's build_q_module; rollout actors run it in torch
# ---------------------------------------------------------------------------------------------
class TorchQPolicy(EpsilonGreedyQ):
    """A Q module in torch, epsilon-greedy: what rollout actors run for a module of one's own, and
    how the learner acts with it in its own process (see :class:`EpsilonGreedyQ`)."""

    def __init__(self, module: Any, observation_space: Any, action_start: int, device: str = "cpu",
                 record_action_values: bool = False) -> None:
        self.module, self.action_start, self.device = module, action_start, device
        self.obs_space = ObsSpace(observation_space)
        self.record_action_values = record_action_values

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        from algorithms.models.torch_policy import load_state_arrays

        load_state_arrays(self.module, {k: v for k, v in weights.items() if k != "__epsilon__"})
        self._take_epsilon(weights)

    def q_values(self, obs: Obs) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.module(self.obs_space.model_input(to_tensors(obs, self.device))).float().cpu().numpy()


def make_torch_q_policy(model: Any, model_config: dict[str, Any], observation_space: Any, action_space: Any,
                        record_action_values: bool = False) -> TorchQPolicy:
    """What a rollout actor calls to build its copy of a module of one's own, on CPU."""
    module = build_q_module(model, model_config, observation_space, action_space)
    return TorchQPolicy(module, observation_space, int(action_space.start), record_action_values=record_action_values)


class QPolicy:
    """The learner's Q network and target network. It acts (for in-process sampling) in numpy on
    views of the built-in network's parameters (a copy, refreshed at every publication, on a
    GPU), or runs a module of one's own in torch."""

    def __init__(self, network: Any, target: Any, observation_space: Any, numpy_kwargs: dict[str, Any] | None,
                 action_start: int, device: str) -> None:
        self.network, self.target, self.device = network, target, device
        self.obs_space = ObsSpace(observation_space)
        self.numpy_kwargs = numpy_kwargs
        self.epsilons = np.ones(1, dtype=np.float32)
        self._actor: Any = (NumpyQPolicy(**numpy_kwargs, arrays=self._arrays()) if numpy_kwargs is not None
                            else TorchQPolicy(network, observation_space, action_start, device))

    def q(self, module: Any, obs: Any) -> torch.Tensor:
        """``module``'s Q-values for a batch of observations as tensors (the env's dtypes): the
        built-in network takes them flattened, a module of one's own as the contract says."""
        if self.numpy_kwargs is not None:
            return module(self.obs_space.flat_torch(obs))
        return module(self.obs_space.model_input(obs))

    def _arrays(self) -> dict[str, np.ndarray]:
        return {name: p.detach().cpu().numpy() for name, p in self.network.state_dict().items()}

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.network.parameters()

    def state_dict(self) -> dict[str, Any]:
        return self.network.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.network.load_state_dict(state)
        self.refresh()

    def refresh(self) -> None:
        """Point the numpy twin at the current parameters (views on a CPU: only needed after a
        load that replaced tensors; a copy on a GPU)."""
        if isinstance(self._actor, NumpyQPolicy):
            self._actor._use(self._arrays())

    def get_weights(self) -> dict[str, np.ndarray]:
        if self.device != "cpu":
            self.refresh()
        return {**{k: np.array(v) for k, v in self._arrays().items()}, "__epsilon__": self.epsilons.copy()}

    def begin_fragment(self) -> None:
        """A new fragment starts: nothing to do (see ``algorithms.sampling.fragment.RolloutPolicy``)."""

    def act(self, obs: Obs, rng: np.random.Generator, explore: bool = True,
            new_noise: bool = False) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        self._actor.epsilon = float(self.epsilons[0])
        return self._actor.act(obs, rng, explore=explore)

    def value(self, obs: Obs) -> np.ndarray:
        return np.zeros(batch_size(obs), dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class DQN(OffPolicyTrainer):
    """DQN with a replay buffer, a target network, double Q, dueling heads and n-step returns.

    A ``tune.Trainable``: ``tune.run("DQN", config={"env": ...})`` for Discrete action spaces.
    ``config["model"]``: the built-in network's options, or ``model(observation_space,
    action_space, model_config) -> torch.nn.Module`` whose ``forward(obs)`` returns Q-values of
    shape (batch, actions) (observations shaped as the space's; rollout actors then run it in torch).
    See ``DQN_DEFAULTS``, ``algorithms.core.off_policy.OFF_POLICY_DEFAULTS`` and
    ``algorithms.core.common_config.COMMON_DEFAULTS`` for the keys; ``learning_starts`` is accepted for
    ``num_steps_sampled_before_learning_starts``.
    """

    _name = "DQN"
    _defaults = DQN_DEFAULTS
    _rebuild_keys = OffPolicyTrainer._rebuild_keys + ("dueling", "prioritized_replay", "prioritized_replay_alpha",
                                                      "prioritized_replay_eps")
    _model_defaults = {"hidden_sizes": [256, 256], "activation": "relu", "shared_layers": False}
    _takes_model_callable = True
    #: Whether rollout actors give their transitions' first priorities (Ape-X's); else a new
    #: transition takes the largest priority so far (the prioritized replay paper's).
    _actor_priorities: ClassVar[bool] = False

    # -- packed trials (algorithms/dqn/packed.py) -----------------------------------------------
    @classmethod
    def pack_signature(cls, config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
        from algorithms.dqn.packed import pack_signature

        return pack_signature(cls, config)

    @classmethod
    def pack_shape_keys(cls) -> tuple[str, ...]:
        from algorithms.dqn.population import SIGNATURE

        return tuple(SIGNATURE)

    @classmethod
    def packed_trainable(cls) -> type[Trainable] | None:
        from algorithms.dqn.packed import PackedDQN

        return PackedDQN if cls is DQN else None  # a subclass (Ape-X) changes what a member would do

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        freq = c["target_network_update_freq"]
        check(is_int(freq) and freq >= 1, "target_network_update_freq", "must be an int >= 1 (env steps)", freq)
        check(is_number(c["tau"]) and 0 < c["tau"] <= 1, "tau", "must be in (0, 1]", c["tau"])
        for key in ("double_q", "dueling", "per_worker_exploration", "prioritized_replay"):
            check(isinstance(c[key], bool), key, "must be True or False", c[key])
        alpha, beta, eps = (c[f"prioritized_replay_{k}"] for k in ("alpha", "beta", "eps"))
        check(is_number(alpha) and alpha >= 0, "prioritized_replay_alpha", "must be a number >= 0", alpha)
        check(is_number(beta) and 0 <= beta <= 1, "prioritized_replay_beta", "must be in [0, 1]", beta)
        check(is_number(eps) and eps > 0, "prioritized_replay_eps", "must be a number > 0", eps)
        if given.get("per_worker_exploration") is True:  # asked for; by default it waits for actors to ladder
            check(c["num_workers"] >= 2, "per_worker_exploration", f"an epsilon ladder needs num_workers >= 2 rollout "
                  f"actors (num_workers is {c['num_workers']}); set it to False for one epsilon", True)
        _, values = schedule_points(c["epsilon"], "epsilon")
        check(all(0 <= v <= 1 for v in values), "epsilon", "values must be in [0, 1]", c["epsilon"])

    # -- building ------------------------------------------------------------------------------
    def _numpy_kwargs(self, observation_space: Any, action_space: Any) -> dict[str, Any]:
        import gymnasium as gym

        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"config key 'env': {self._name} needs a Discrete action space, this env has {action_space}")
        model = self.cfg["model"]
        kwargs = {"obs_dim": ObsSpace(observation_space).flat_dim, "num_actions": int(action_space.n),
                  "action_start": int(action_space.start)}
        if callable(model):  # a module of one's own: no built-in options
            return kwargs
        return {**kwargs, "hidden_sizes": list(model["hidden_sizes"]), "activation": model["activation"],
                "dueling": self.cfg["dueling"]}

    def build_policy(self, observation_space: Any, action_space: Any) -> tuple[Any, Callable[..., Any], dict[str, Any]]:
        import copy

        import torch

        from algorithms.data.observations import has_image

        c = self.cfg
        kwargs = self._numpy_kwargs(observation_space, action_space)
        torch_kwargs = {k: v for k, v in kwargs.items() if k != "action_start"}
        model, model_config = c["model"], dict(c["model_config"])
        if not callable(model) and has_image(observation_space):  # a CNN: the module path, in torch everywhere
            model_config = {**torch_kwargs, "cnn": model["cnn"]}
            model = image_q_model
        with torch.random.fork_rng(devices=[]):  # seeded init, the global RNG left alone
            torch.manual_seed(self.seed)
            if callable(model):
                network = build_q_module(model, model_config, observation_space, action_space)
            else:
                network = make_q_network(**torch_kwargs)
        network.to(self.device)
        target = copy.deepcopy(network)
        target.requires_grad_(False)
        # Ape-X: the rollout actors value what they do, for their transitions' first priorities
        recording = {"record_action_values": True} if self._actor_priorities and c["prioritized_replay"] else {}
        if callable(model):
            factory_kwargs = {"model": model, "model_config": model_config,
                              "observation_space": observation_space, "action_space": action_space, **recording}
            policy = QPolicy(network, target, observation_space, None, kwargs["action_start"], str(self.device))
            return policy, make_torch_q_policy, factory_kwargs
        kwargs = {**kwargs, "observation_space": observation_space}  # the numpy twin flattens what the env gives
        policy = QPolicy(network, target, observation_space, kwargs, kwargs["action_start"], str(self.device))
        return policy, make_numpy_q_policy, {**kwargs, **recording}

    def build_optimizers(self) -> dict[str, Any]:
        c = self.cfg
        self.last_target_update = 0
        return {"q": make_optimizer(list(self.policy.parameters()), c["optimizer"], c["optimizer_config"], c["lr"])}

    def build_learner(self) -> None:
        super().build_learner()
        self._set_epsilons()

    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        return (), np.int64

    # -- exploration ---------------------------------------------------------------------------
    def current_epsilon(self) -> float:
        steps, values = schedule_points(self.cfg["epsilon"], "epsilon")
        return float(np.interp(self.env_steps_total, steps, values))

    def _set_epsilons(self) -> None:
        """Epsilon of the in-process worker (index 0) and of each rollout actor (1..N)."""
        c, eps = self.cfg, self.current_epsilon()
        n = c["num_workers"]
        if n >= 2 and c["per_worker_exploration"]:
            actors = [eps ** (1 + 7 * (i - 1) / (n - 1)) for i in range(1, n + 1)]
        else:
            actors = [eps] * n
        self.policy.epsilons = np.asarray([eps] + actors, dtype=np.float32)

    # -- learning ------------------------------------------------------------------------------
    def update(self, batch: dict[str, Any]) -> dict[str, Any]:
        """One update: the Huber loss of Q(s, a) to the (double) Q-learning target."""
        import torch

        c = self.cfg
        policy = self.policy
        network, target = policy.network, policy.target
        with torch.no_grad():
            next_q = policy.q(target, batch["next_obs"])
            if c["double_q"]:  # the online network picks the action, the target network values it
                best = policy.q(network, batch["next_obs"]).argmax(-1, keepdim=True)
                next_value = next_q.gather(-1, best)[:, 0]
            else:
                next_value = next_q.max(-1).values
            # discounts: gamma ** n for the n steps taken, 0 where the episode terminated
            y = batch["rewards"] + batch["discounts"] * next_value
        q = policy.q(network, batch["obs"]).gather(-1, batch["actions"][:, None])[:, 0]
        losses = torch.nn.functional.smooth_l1_loss(q, y, reduction="none")
        if isinstance(self.buffer, PrioritizedReplayBuffer):  # the draw's bias corrected, the priorities renewed
            loss = (batch["weights"] * losses).mean()
            self.buffer.update_priorities(batch["indices"].cpu().numpy(), (q - y).detach().cpu().numpy())
        else:
            loss = losses.mean()
        self.step_optimizer("q", loss, network)
        return {"td_loss": loss.detach(), "q_mean": q.detach().mean()}

    def make_replay_buffer(self, capacity: int, action_shape: tuple[int, ...], action_dtype: Any) -> ReplayBuffer:
        c = self.cfg
        if not c["prioritized_replay"]:
            return super().make_replay_buffer(capacity, action_shape, action_dtype)
        return PrioritizedReplayBuffer(capacity, self.observation_space, action_shape, action_dtype,
                                       alpha=float(c["prioritized_replay_alpha"]),
                                       beta=float(c["prioritized_replay_beta"]), eps=float(c["prioritized_replay_eps"]))

    def after_round(self) -> None:
        if self.env_steps_total - self.last_target_update >= self.cfg["target_network_update_freq"]:
            import torch

            tau = float(self.cfg["tau"])
            with torch.no_grad():
                for t, p in zip(self.policy.target.parameters(), self.policy.network.parameters()):
                    t.lerp_(p, tau)  # tau = 1: a copy
            self.last_target_update = self.env_steps_total
        self._set_epsilons()

    def step(self) -> dict[str, Any]:
        return {**super().step(), "epsilon": float(self.policy.epsilons[0])}

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        super().reset_algorithm_config(old, new)
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self.buffer.beta = float(new["prioritized_replay_beta"])

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        return {**super().learner_state(), "last_target_update": self.last_target_update,
                "target": {k: v.cpu() for k, v in self.policy.target.state_dict().items()}}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        super().load_learner_state(state)
        self.policy.target.load_state_dict(state["target"])
        self.last_target_update = int(state["last_target_update"])
        self.policy.refresh()
        self._set_epsilons()
