"""Proximal Policy Optimization (Schulman et al. 2017), as a trial that owns its rollout actors.

Read top to bottom: config and defaults, advantages (GAE), the trainer that ties them to the
worker group of ``algorithms/core/trainer.py`` (rollouts: ``algorithms/sampling/rollout_worker.py``), the PPO update.
The network is the built-in one (``algorithms/ppo/model.py``, acting in numpy in the rollout
actors) or any module of the model contract (``algorithms/models/contract.py``).

    from algorithms import PPO
    trainer = PPO(config={"env": "CartPole-v1"})
    for _ in range(100):
        result = trainer.train()          # one iteration: sample train_batch_size steps, learn
    trainer.save("/tmp/ppo")              # torch.save of state_dicts + plain data

    from tuner import tune
    tune.run("PPO", config={"env": "CartPole-v1", "lr": tune.loguniform(1e-4, 3e-3)},
             metric="episode_return_mean", mode="max", stop={"env_steps_total": 100_000})

Its defaults, and why each: docs/algorithms.md (PPO).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from algorithms.core.learner_config import is_builtin
from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
from algorithms.sampling.fragment import Fragment, TrainBatch, concat_batches
from algorithms.data.gae import compute_gae
from algorithms.data.observations import flatten_lead, index, to_tensors
from algorithms.core.common_config import check
from algorithms.core.trainer import DistributedTrainer
from schedulers.validation import is_int, is_number
from tuner.trainable.trainable import Trainable

if TYPE_CHECKING:
    import torch

    from algorithms.ppo.learner import PPOLearner

# torch is imported where the learner needs it (building its network, learning), never at this
# module's import: the driver imports this module to size a trial's placement group, and a trial
# starts its rollout actors before it pays for torch (algorithms/ppo/model.py).

PPO_DEFAULTS: dict[str, Any] = {
    # sampling (num_workers, num_envs_per_worker, train_batch_size, sample_async: trainer.py)
    "minibatch_size": 512,
    "num_epochs": 10,
    # optimisation
    "lr": 2.5e-3,
    "lr_schedule": "constant",  # "constant" | ("linear", total_env_steps) | [[env_steps, lr], ...]
    "max_grad_norm": 0.5,
    # the objective
    "gamma": 0.99,
    "lambda_": 0.95,
    "clip_param": 0.2,
    "vf_clip_param": None,  # None: off; else clip V around the sampling-time value (CleanRL's clip_vloss)
    "vf_loss_coeff": 0.5,
    "entropy_coeff": 0.0,
    "normalize_advantages": True,
    # fragments sampled with older weights (asynchronous sampling): the surrogate's ratio is taken
    # against the current policy and each sample weighted by pi_current / pi_behaviour, clipped here
    "is_ratio_clip": 2.0,
    # the built-in network's layer sizes and activation (shorthands of model={"hidden_sizes": ...,
    # "activation": ...}; "model" and "model_config" take a network of one's own: algorithms/models/contract.py)
    "hidden_sizes": [64, 64],
    "activation": "tanh",
    # "numpy": the hand-derived gradient (the built-in separate tanh MLP, Discrete actions, CPU, Adam);
    # "torch": autograd and torch.optim, any model and device; "auto": numpy where it applies
    "learner": "auto",
    # Box actions: gSDE exploration (SB3's use_sde), new noise every sde_sample_freq steps (-1: per fragment)
    "use_sde": False,
    "sde_sample_freq": -1,
}

# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class PPO(DistributedTrainer):
    """PPO with clipped surrogate, GAE, optional value clipping and entropy bonus.

    A ``tune.Trainable``: ``tune.run("PPO", config={"env": ...})``. See ``PPO_DEFAULTS`` and
    ``algorithms.core.common_config.COMMON_DEFAULTS`` for the keys; ``lambda`` is accepted for ``lambda_``.
    """

    _name = "PPO"
    _defaults = PPO_DEFAULTS
    _aliases = {"lambda": "lambda_"}
    _rebuild_keys = DistributedTrainer._rebuild_keys + (
        "hidden_sizes", "activation", "use_sde", "sde_sample_freq", "learner")
    _model_shorthands = ("hidden_sizes", "activation")

    # Built by build_learner: the numpy learner where it applies, else the torch one
    # (learner_name says which), and its optimiser.
    learner: PPOLearner
    optimizer: Any
    # The first weights, drawn in numpy before the learner has torch, until the policy holds them.
    _initial_weights: dict[str, np.ndarray] | None = None

    # -- packed trials (algorithms/ppo/packed.py) -----------------------------------------------
    @classmethod
    def pack_signature(cls, config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
        from algorithms.ppo.packed import pack_signature

        return pack_signature(cls, config)

    @classmethod
    def pack_shape_keys(cls) -> tuple[str, ...]:
        from algorithms.ppo.population import SIGNATURE

        return (*SIGNATURE, "activation")

    @classmethod
    def packed_trainable(cls) -> type[Trainable] | None:
        from algorithms.ppo.packed import PackedPPO

        return PackedPPO if cls is PPO else None  # a subclass may change what a member would do

    # -- config ------------------------------------------------------------------------------
    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        if "minibatch_size" not in given and is_int(c["train_batch_size"]):
            c["minibatch_size"] = min(c["minibatch_size"], c["train_batch_size"])  # a small batch: one minibatch
        check(is_number(c["lr"]) and c["lr"] > 0, "lr", "must be a number > 0", c["lr"])
        check(is_number(c["gamma"]) and 0 < c["gamma"] <= 1, "gamma", "must be in (0, 1]", c["gamma"])
        check(is_number(c["lambda_"]) and 0 <= c["lambda_"] <= 1, "lambda_' / 'lambda", "must be in [0, 1]", c["lambda_"])
        check(is_number(c["clip_param"]) and c["clip_param"] > 0, "clip_param", "must be a number > 0", c["clip_param"])
        check(c["vf_clip_param"] is None or (is_number(c["vf_clip_param"]) and c["vf_clip_param"] > 0),
              "vf_clip_param", "must be None (off) or a number > 0", c["vf_clip_param"])
        check(is_number(c["vf_loss_coeff"]) and c["vf_loss_coeff"] >= 0, "vf_loss_coeff", "must be a number >= 0",
              c["vf_loss_coeff"])
        check(is_number(c["entropy_coeff"]) and c["entropy_coeff"] >= 0, "entropy_coeff", "must be a number >= 0",
              c["entropy_coeff"])
        check(c["max_grad_norm"] is None or (is_number(c["max_grad_norm"]) and c["max_grad_norm"] > 0),
              "max_grad_norm", "must be None (off) or a number > 0", c["max_grad_norm"])
        check(is_int(c["num_epochs"]) and c["num_epochs"] >= 1, "num_epochs", "must be an int >= 1", c["num_epochs"])
        check(is_int(c["minibatch_size"]) and c["minibatch_size"] >= 1, "minibatch_size", "must be an int >= 1",
              c["minibatch_size"])
        check(c["minibatch_size"] <= c["train_batch_size"], "minibatch_size",
              f"must be <= train_batch_size ({c['train_batch_size']})", c["minibatch_size"])
        check(isinstance(c["normalize_advantages"], bool), "normalize_advantages", "must be True or False",
              c["normalize_advantages"])
        check(is_number(c["is_ratio_clip"]) and c["is_ratio_clip"] > 0, "is_ratio_clip", "must be a number > 0",
              c["is_ratio_clip"])
        check(isinstance(c["use_sde"], bool), "use_sde", "must be True or False", c["use_sde"])
        check(is_int(c["sde_sample_freq"]) and (c["sde_sample_freq"] == -1 or c["sde_sample_freq"] >= 1),
              "sde_sample_freq", "must be -1 (once per fragment) or an int >= 1", c["sde_sample_freq"])
        check(not c["use_sde"] or _stacked(c), "use_sde", "gSDE is an option of the built-in model with separate "
              "policy and value networks (no model callable, no shared_layers)", c["use_sde"])
        check(c["learner"] in LEARNERS, "learner", f"must be one of {list(LEARNERS)}", c["learner"])
        if c["learner"] == "numpy":
            blocker = _numpy_learner_blocker(c)
            check(blocker is None, "learner", f"'numpy' {NUMPY_COVERS}; here {blocker}: use 'torch' or 'auto'",
                  c["learner"])
        _lr_schedule_points(c["lr_schedule"], c["lr"])  # raises for a bad schedule

    # -- building ------------------------------------------------------------------------------
    def _policy_kwargs(self, observation_space: Any, action_space: Any) -> dict[str, Any]:
        from algorithms.data.observations import ObsSpace

        return {
            "obs_dim": ObsSpace(observation_space).flat_dim,
            "observation_space": observation_space,
            "action_space": action_space,
            "hidden_sizes": list(self.cfg["model"]["hidden_sizes"]),
            "activation": self.cfg["model"]["activation"],
            "sde": self.cfg["use_sde"],
            "sde_sample_freq": self.cfg["sde_sample_freq"],
        }

    def _stacked_network(self, observation_space: Any, action_space: Any) -> bool:
        """Whether the policy is the built-in stacked network (``ActorCritic``), which rollout actors
        run in numpy; else a module of the model contract (``TorchPolicy``)."""
        import gymnasium as gym

        from algorithms.data.observations import has_image

        return (_stacked(self.cfg) and isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box))
                and not has_image(observation_space))

    def rollout_policy(self, observation_space: Any, action_space: Any) -> tuple[Callable[..., Any], dict[str, Any], Any] | None:
        # The built-in network: rollout actors act in numpy and never import torch
        # (algorithms/ppo/fast/numpy_policy.py); the first weights are drawn in numpy too, so the actors
        # sample before the learner has torch. Other models: the actors start after the learner
        # built the module, and run it in torch.
        if not self._stacked_network(observation_space, action_space):
            return None
        kwargs = self._policy_kwargs(observation_space, action_space)
        if self._initial_weights is None:
            policy = make_numpy_actor_critic(**kwargs)
            policy.reset_parameters(np.random.default_rng([self.seed, 1]))
            self._initial_weights = policy.get_weights()
        return make_numpy_actor_critic, kwargs, self._initial_weights

    def build_policy(self, observation_space: Any, action_space: Any) -> tuple[Any, Callable[..., Any], dict[str, Any]]:
        import torch

        self.torch_rng = torch.Generator().manual_seed(self.seed)
        if not self._stacked_network(observation_space, action_space):
            return super().build_policy(observation_space, action_space)
        from algorithms.ppo.model import make_actor_critic

        built = self.rollout_policy(observation_space, action_space)
        assert built is not None  # the stacked network's
        _, kwargs, weights = built
        policy = make_actor_critic(**kwargs)
        policy.load_weights(weights)
        policy.to(self.device)
        self._initial_weights = None  # the policy holds them now
        return policy, make_numpy_actor_critic, policy.numpy_kwargs()

    def build_learner(self) -> None:
        c = self.cfg
        blocker = _numpy_learner_blocker(c, self.action_space, self.observation_space)
        if c["learner"] == "numpy" and blocker is not None:
            check(False, "learner", f"'numpy' {NUMPY_COVERS}; here {blocker}: use 'torch' or 'auto'", c["learner"])
        if c["learner"] != "torch" and blocker is None:
            from algorithms.ppo.fast.numpy_learner import NumpyPPOLearner

            self.learner = NumpyPPOLearner(self.policy, self.torch_rng, c)
        else:
            from algorithms.ppo.learner import TorchPPOLearner

            self.learner = TorchPPOLearner(self.policy, self.torch_rng, self.device, c)
        self.learner_name = self.learner.name
        self.optimizer = self.learner.optimizer

    # -- from fragments to a train batch --------------------------------------------------------
    def postprocess_fragments(self, fragments: list[Fragment]) -> TrainBatch:
        """GAE over each fragment, in the learner. A fragment sampled with older weights (the
        asynchronous case) is judged by the current policy first (see :meth:`_correct_stale`)."""
        current = self.workers.weights_version
        batches = []
        for fragment in fragments:
            stale = fragment.weights_version is not None and fragment.weights_version != current
            is_weight = None
            if stale:
                fragment, is_weight = self._correct_stale(fragment)
            elif fragment.last_values is None:  # a streamed fragment: bootstrapped by the learner
                fragment = fragment.replace(last_values=self.policy.value(fragment.last_obs))
            batch = compute_gae(fragment, float(self.cfg["gamma"]), float(self.cfg["lambda_"]))
            if is_weight is not None:
                batch = batch.replace(is_weight=is_weight, stale_steps=_stale_steps(fragment, current, batch.env_steps))
            batches.append(batch)
        return concat_batches(batches)

    def _correct_stale(self, fragment: Fragment) -> tuple[Fragment, np.ndarray]:
        """Make a fragment sampled with older weights one the current policy can learn from.

        Decoupled PPO (Hilton et al. 2021), as APPO does with its importance ratio: the values
        (and so the advantages and value targets) are the current value function's, the clipped
        ratio is taken against the current policy ``pi`` rather than the behaviour policy ``mu``
        that sampled the fragment, so the update is trusted around where the learner is, and each
        transition is weighted by ``min(pi(a|s) / mu(a|s), is_ratio_clip)`` for the distribution
        it was drawn from. Returns the fragment with the current policy's ``logp``, ``values`` and
        ``last_values``, and the weights of its valid transitions, flat.
        """
        import torch

        T, N = fragment.valid.shape
        obs = to_tensors(flatten_lead(fragment.obs), self.device)
        actions = self.policy.actions_tensor(self._tensor(fragment.actions.reshape(T * N, -1)))
        with torch.no_grad():
            logp, _, values = self.policy.evaluate(obs, actions, with_entropy=False)
        current = fragment.replace(
            logp=logp.cpu().numpy().reshape(T, N), values=values.cpu().numpy().reshape(T, N),
            last_values=self.policy.value(fragment.last_obs),
        )
        mask = fragment.valid.reshape(-1)
        log_ratio = (current.logp - fragment.logp).reshape(-1)[mask]
        return current, np.minimum(np.exp(log_ratio), self.cfg["is_ratio_clip"]).astype(np.float32)

    # -- learning rate ---------------------------------------------------------------------------
    def current_lr(self) -> float:
        steps, lrs = _lr_schedule_points(self.cfg["lr_schedule"], self.cfg["lr"])
        return float(np.interp(self.env_steps_total, steps, lrs))

    def _apply_lr(self) -> None:
        self.learner.set_lr(self.current_lr())

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """A float32 tensor of ``array`` on the learner's device (a copy: Ray hands out read-only arrays)."""
        import torch

        return torch.from_numpy(np.array(array, dtype=np.float32)).to(self.device)

    # -- the PPO update ---------------------------------------------------------------------------
    def learn_on_batch(self, batch: TrainBatch) -> dict[str, float]:
        """``num_epochs`` passes of minibatch SGD over the batch on the clipped PPO objective."""
        import torch

        c = self.cfg
        self._apply_lr()
        advantages = batch.advantages
        if c["normalize_advantages"] and len(advantages) > 1:  # over the train batch, as RLlib
            advantages = (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8)
        if batch.stale_steps:  # the off-policy weights of stale fragments (see _correct_stale)
            advantages = advantages * batch.is_weight
        n = len(advantages)
        stats = self.learner.update(batch, advantages, c)
        with torch.no_grad():
            mb = c["minibatch_size"]
            actions = self.policy.actions_tensor(self._tensor(batch.actions[:mb].reshape(min(mb, n), -1)))
            _, entropy, _ = self.policy.evaluate(to_tensors(index(batch.obs, slice(None, mb)), self.device), actions)
        return {
            "policy_loss": stats.policy_loss,
            "vf_loss": stats.vf_loss,
            "entropy": float(entropy.mean()),
            "approx_kl": stats.approx_kl,
            "clip_fraction": stats.clip_fraction,
            "cur_lr": self.current_lr(),
            "num_sgd_updates": stats.num_sgd_updates,
            "stale_fraction": batch.stale_steps / max(n, 1),
            "is_weight_mean": float(batch.is_weight.mean()) if n else 1.0,
        }

    # -- state ------------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        return {"optimizer": self.learner.state(self.cfg), "torch_rng": self.torch_rng.get_state()}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        """The optimiser's state from a checkpoint of either learner; a checkpoint of another
        optimiser (a PBT donor with other keys, say) leaves this one's state fresh."""
        saved = state.get("optimizer")
        if saved is not None and saved["name"] == self.learner.optimizer_name(self.cfg):
            self.learner.load_state(saved, self.cfg)
        self.torch_rng.set_state(state["torch_rng"])
        self._apply_lr()  # our config's lr (and schedule) wins over the one saved with the optimiser

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # entropy_coeff, clip_param, gamma, lambda_, batch shape... are read from self.cfg at
        # every iteration; the learning rate lives in the optimiser too.
        self._apply_lr()


def _stale_steps(fragment: Fragment, current: int, env_steps: int) -> int:
    """The transitions of a stale fragment sampled with weights older than ``current`` (a
    streamed fragment records each step's version: the steps after new weights arrived are not)."""
    versions = fragment.weights_versions
    if versions is None:
        return env_steps
    return int((fragment.valid & (np.asarray(versions) != current)[:, None]).sum())


LEARNERS = ("auto", "torch", "numpy")
NUMPY_COVERS = ("covers the built-in model with separate tanh layers, Discrete actions, a CPU learner and Adam "
                "(eps, betas)")


def _stacked(c: dict[str, Any]) -> bool:
    """Whether the config asks for the built-in separate policy and value MLPs (stacked layers)."""
    return is_builtin(c["model"]) and not c["model"]["shared_layers"]


def _numpy_learner_blocker(c: dict[str, Any], action_space: Any = None, observation_space: Any = None) -> str | None:
    """Why the numpy learner does not apply to this config (and action space), or None when it does."""
    import gymnasium as gym

    if not _stacked(c):
        return "a model callable" if not is_builtin(c["model"]) else "shared_layers=True"
    if c["model"]["activation"] != "tanh":
        return f"activation {c['model']['activation']!r}"
    if c["num_gpus_for_learner"]:
        return "a GPU learner"
    if c["optimizer"] != "adam" or set(c["optimizer_config"]) - {"eps", "betas"}:
        return f"optimizer {c['optimizer']!r} with {dict(c['optimizer_config'])}"
    if action_space is not None and not isinstance(action_space, gym.spaces.Discrete):
        return f"action space {action_space}"
    if observation_space is not None:
        from algorithms.data.observations import has_image

        if has_image(observation_space):
            return "image observations (a CNN)"
    return None


def _lr_schedule_points(schedule: Any, lr: float) -> tuple[list[float], list[float]]:
    """(env steps, lr) points to interpolate: constant, ("linear", total), or RLlib's [[step, lr], ...]."""
    if schedule is None or schedule == "constant":
        return [0.0], [float(lr)]
    if isinstance(schedule, (list, tuple)) and len(schedule) == 2 and schedule[0] == "linear":
        total = schedule[1]
        check(is_number(total) and total > 0, "lr_schedule", "('linear', total_env_steps) needs total_env_steps > 0",
              schedule)
        return [0.0, float(total)], [float(lr), 0.0]
    if isinstance(schedule, (list, tuple)) and schedule and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and is_number(p[0]) and is_number(p[1]) and p[1] >= 0 for p in schedule
    ):
        steps = [float(p[0]) for p in schedule]
        check(all(a <= b for a, b in zip(steps, steps[1:])), "lr_schedule", "steps must be increasing", schedule)
        return steps, [float(p[1]) for p in schedule]
    check(False, "lr_schedule", "must be 'constant', ('linear', total_env_steps) or a list of [env_steps, lr] pairs",
          schedule)
    raise AssertionError  # unreachable
