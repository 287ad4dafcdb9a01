"""Proximal Policy Optimization (Schulman et al. 2017), as a trial that owns its rollout actors.

Read top to bottom: config and defaults, advantages (GAE), the trainer that ties them to the
worker group of ``algorithms/trainer.py`` (rollouts: ``algorithms/rollout.py``), the PPO update.
The network is the built-in one (``algorithms/ppo_model.py``, acting in numpy in the rollout
actors) or any module of the model contract (``algorithms/models.py``).

    from algorithms import PPO
    trainer = PPO(config={"env": "CartPole-v1"})
    for _ in range(100):
        result = trainer.train()          # one iteration: sample train_batch_size steps, learn
    trainer.save("/tmp/ppo")              # torch.save of state_dicts + plain data

    from tuner import tune
    tune.run("PPO", config={"env": "CartPole-v1", "lr": tune.loguniform(1e-4, 3e-3)},
             metric="episode_return_mean", mode="max", stop={"env_steps_total": 100_000})

Defaults, and why
-----------------
Keys and meanings follow RLlib's PPO (``lr``, ``gamma``, ``lambda``, ``clip_param``,
``vf_clip_param``, ``vf_loss_coeff``, ``entropy_coeff``, ``train_batch_size``, ``minibatch_size``,
``num_epochs``, ``num_workers``, ``num_envs_per_worker``). The objective's defaults are the usual
PPO ones: gamma 0.99, lambda 0.95, clip 0.2, value loss coefficient 0.5, no entropy bonus, no
value clipping, separate 64x64 tanh policy and value networks, Adam, gradient norm 0.5,
advantages normalised over the train batch (as RLlib). The batch shape and the learning rate
are chosen for speed on small problems. "Solved" is benchmarks/ppo_cartpole.py's rule: the mean
return of the last 100 episodes reaches 475 on CartPole-v1 within 100k env steps.

* ``num_envs_per_worker=16, train_batch_size=2048`` (128 steps of each env per iteration),
  ``minibatch_size=512, num_epochs=10, lr=2.5e-3``: 20 of 20 seeds solved, at 63k-71k env steps,
  with about 1,300 SGD updates. Variations, 10 seeds each: ``train_batch_size=1024``: 9/10
  (66k-102k); ``train_batch_size=4096``: 10/10 but 69k-85k; ``lr=3e-3``: 10/10 (61k-69k);
  ``train_batch_size=1024, lr=2e-3``: 6/10. rl-zoo's shape (8 envs x 32 steps, one minibatch
  of 256, 20 epochs) needs about six times as many SGD updates per env step.
* Learning is most of a CartPole run, on one thread (the learner's torch threads are
  ``int(num_cpus_for_learner)``; a second thread does not speed up a network this small). For a
  network this small the number of calls is the cost, so the built-in separate tanh MLPs with
  Discrete actions learn in numpy, the loss's gradient derived by hand (``algorithms/ppo_numpy.py``,
  tested equal to autograd) and Adam stepped on ``FlatAdam``'s flat buffer: ``learner="numpy"``,
  which ``learner="auto"`` chooses where it applies. Everything else (Box and MultiDiscrete
  actions, other activations, shared layers, a model of one's own, a GPU, other optimisers)
  learns with ``learner="torch"``: autograd and ``torch.optim`` over one flat parameter buffer
  (``algorithms/flat_params.py``). benchmarks/ppo_cartpole.py times both next to SB3.
* ``num_workers=0``: sample in the learner's process, like RLlib's local env runner. On CartPole
  a fragment is cheaper to sample than to ship, and on two cores a learner and its rollout
  actors compete for the same CPUs, so rollout actors do not pay off there; they do with slow
  or uneven environments (benchmarks/lockstep.py, benchmarks/slow_sim.py) and more cores, where
  ``num_workers="auto"`` starts them. ``sample_async=True`` streams: each actor steps without
  pause and only the steps sampled while new weights travel are behind (``WorkerGroup.stream``);
  request-based asynchronous sampling (``max_requests_in_flight_per_worker``) learns less per
  env step, as a whole fragment is sampled with the previous iteration's weights.
* Rollout inference runs in numpy on views of the torch parameters (``ActorCritic.act``): for a
  vector step of 16 CartPole envs, torch's per-call cost is more than the env step itself
  (benchmarks/sampling.py prints both).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from algorithms.learner_config import OPTIMIZERS, is_builtin, make_optimizer, set_lr, to_cpu
from algorithms.numpy_policy import make_numpy_actor_critic
from algorithms.fragment import Fragment, TrainBatch, concat_batches
from algorithms.trainer import DistributedTrainer, check
from schedulers.validation import is_int, is_number

if TYPE_CHECKING:
    import torch

    from algorithms.flat_params import FlatParameters
    from algorithms.ppo_numpy import NumpyPPOUpdate

# torch is imported where the learner needs it (building its network, learning), never at this
# module's import: the driver imports this module to size a trial's placement group, and a trial
# starts its rollout actors before it pays for torch (algorithms/ppo_model.py).

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
    # "activation": ...}; "model" and "model_config" take a network of one's own: algorithms/models.py)
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
# Advantages: GAE(lambda), in the rollout worker, on a (time, env) fragment
# ---------------------------------------------------------------------------------------------
def compute_gae(fragment: Fragment, gamma: float, lambda_: float) -> TrainBatch:
    """Advantages and value targets of a fragment; returns the flat batch of its real transitions.

    ``values[t]`` is V(obs[t]) at sampling time. A step that *terminates* bootstraps with 0; one
    that is *truncated* (time limit) bootstraps with V(final observation), which in NEXT_STEP
    autoreset mode is the value the worker computed at the following reset step (or
    ``last_values`` at the end of the fragment); neither carries the advantage across. Reset
    steps (``valid`` False) are no transitions and are dropped. The fragment needs its
    ``last_values``.
    """
    values, rewards = fragment.values, fragment.rewards
    terminated, truncated, valid = fragment.terminated, fragment.truncated, fragment.valid
    if fragment.last_values is None:
        raise ValueError("compute_gae: the fragment has no last_values (a streamed fragment: bootstrap it first)")
    next_values = np.concatenate([values[1:], fragment.last_values[None].astype(np.float32)])
    # TD errors and the advantage's carry-over factor for every step at once, zero at reset steps:
    # adv[t] = delta[t] + carry[t] * adv[t + 1]
    delta = (rewards + gamma * next_values * ~terminated - values) * valid
    carry = ((gamma * lambda_) * (~(terminated | truncated) & valid)).astype(np.float32)
    advantages = np.empty_like(values)
    last = np.zeros_like(values[0])
    for t in range(len(values) - 1, -1, -1):
        last = delta[t] + carry[t] * last
        advantages[t] = last
    mask = valid.reshape(-1)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])[mask]  # noqa: E731
    env_steps = int(mask.sum())
    return TrainBatch(
        obs=flat(fragment.obs), actions=flat(fragment.actions), logp=flat(fragment.logp), values=flat(values),
        advantages=flat(advantages), returns=flat(advantages + values), is_weight=np.ones(env_steps, np.float32),
        episode_returns=fragment.episode_returns, episode_lens=fragment.episode_lens, env_steps=env_steps,
        slots=int(mask.size),
    )


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class PPO(DistributedTrainer):
    """PPO with clipped surrogate, GAE, optional value clipping and entropy bonus.

    A ``tune.Trainable``: ``tune.run("PPO", config={"env": ...})``. See ``PPO_DEFAULTS`` and
    ``algorithms.trainer.COMMON_DEFAULTS`` for the keys; ``lambda`` is accepted for ``lambda_``.
    """

    _name = "PPO"
    _defaults = PPO_DEFAULTS
    _aliases = {"lambda": "lambda_"}
    _rebuild_keys = DistributedTrainer._rebuild_keys + (
        "hidden_sizes", "activation", "use_sde", "sde_sample_freq", "learner")
    _model_shorthands = ("hidden_sizes", "activation")

    # Built by build_learner. The optimiser is a FlatAdam with the numpy learner, else the torch
    # optimiser make_optimizer builds (learner_name says which).
    optimizer: Any
    _numpy_update: NumpyPPOUpdate | None
    _flat: FlatParameters | None

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
    def _policy_kwargs(self, observation_space, action_space) -> dict[str, Any]:
        from algorithms.rollout import ObsEncoder

        return {
            "obs_dim": ObsEncoder(observation_space).dim,
            "action_space": action_space,
            "hidden_sizes": list(self.cfg["model"]["hidden_sizes"]),
            "activation": self.cfg["model"]["activation"],
            "sde": self.cfg["use_sde"],
            "sde_sample_freq": self.cfg["sde_sample_freq"],
        }

    def _stacked_network(self, action_space) -> bool:
        """Whether the policy is the built-in stacked network (``ActorCritic``), which rollout actors
        run in numpy; else a module of the model contract (``TorchPolicy``)."""
        import gymnasium as gym

        return _stacked(self.cfg) and isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box))

    def rollout_policy(self, observation_space, action_space):
        # The built-in network: rollout actors act in numpy and never import torch
        # (algorithms/numpy_policy.py); the first weights are drawn in numpy too, so the actors
        # sample before the learner has torch. Other models: the actors start after the learner
        # built the module, and run it in torch.
        if not self._stacked_network(action_space):
            return None
        kwargs = self._policy_kwargs(observation_space, action_space)
        if getattr(self, "_initial_weights", None) is None:
            policy = make_numpy_actor_critic(**kwargs)
            policy.reset_parameters(np.random.default_rng([self.seed, 1]))
            self._initial_weights = policy.get_weights()
        return make_numpy_actor_critic, kwargs, self._initial_weights

    def build_policy(self, observation_space, action_space):
        import torch

        self.torch_rng = torch.Generator().manual_seed(self.seed)
        if not self._stacked_network(action_space):
            return super().build_policy(observation_space, action_space)
        from algorithms.ppo_model import make_actor_critic

        _, kwargs, weights = self.rollout_policy(observation_space, action_space)
        policy = make_actor_critic(**kwargs)
        policy.load_weights(weights)
        policy.to(self.device)
        self._initial_weights = None  # the policy holds them now
        return policy, make_numpy_actor_critic, policy.numpy_kwargs()

    def build_learner(self) -> None:
        c = self.cfg
        self._params = list(self.policy.parameters())
        blocker = _numpy_learner_blocker(c, self.action_space)
        if c["learner"] == "numpy" and blocker is not None:
            check(False, "learner", f"'numpy' {NUMPY_COVERS}; here {blocker}: use 'torch' or 'auto'", c["learner"])
        self.learner_name = "numpy" if c["learner"] != "torch" and blocker is None else "torch"
        if self.learner_name == "numpy":
            from algorithms.flat_adam import FlatAdam
            from algorithms.ppo_numpy import NumpyPPOUpdate

            self.optimizer = FlatAdam(self._params, lr=c["lr"], **{**OPTIMIZERS["adam"], **c["optimizer_config"]})
            self._numpy_update = NumpyPPOUpdate(self.policy, self.optimizer)
            self._flat = None
        else:
            from algorithms.flat_params import FlatParameters
            from algorithms.optimizer_step import lean_step

            # one flat buffer behind the parameters where they allow it: one tensor to zero, clip and step
            self._flat = FlatParameters(self._params) if FlatParameters.fits(self._params) else None
            params = [self._flat.flat] if self._flat is not None else self._params
            self.optimizer = make_optimizer(params, c["optimizer"], c["optimizer_config"], c["lr"])
            self._optimizer_step = lean_step(self.optimizer)
            self._numpy_update = None

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
                fragment = fragment.replace(last_values=self.policy.value(np.asarray(fragment.last_obs, np.float32)))
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
        obs = self._tensor(fragment.obs.reshape(T * N, -1))
        actions = self.policy.actions_tensor(self._tensor(fragment.actions.reshape(T * N, -1)))
        with torch.no_grad():
            logp, _, values = self.policy.evaluate(obs, actions, with_entropy=False)
        current = fragment.replace(
            logp=logp.cpu().numpy().reshape(T, N), values=values.cpu().numpy().reshape(T, N),
            last_values=self.policy.value(np.asarray(fragment.last_obs, dtype=np.float32)),
        )
        mask = fragment.valid.reshape(-1)
        log_ratio = (current.logp - fragment.logp).reshape(-1)[mask]
        return current, np.minimum(np.exp(log_ratio), self.cfg["is_ratio_clip"]).astype(np.float32)

    # -- learning rate ---------------------------------------------------------------------------
    def current_lr(self) -> float:
        steps, lrs = _lr_schedule_points(self.cfg["lr_schedule"], self.cfg["lr"])
        return float(np.interp(self.env_steps_total, steps, lrs))

    def _apply_lr(self) -> None:
        if self.learner_name == "numpy":
            self.optimizer.lr = self.current_lr()
        else:
            set_lr(self.optimizer, self.current_lr())

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
        numpy_update = self._numpy_update
        step = self._numpy_step if numpy_update is not None else self._autograd_step
        # Per-update statistics stay where the update ran (a tensor on the learner's device, an
        # array in numpy) and are read once after the last epoch: a float() per update would wait
        # for a GPU to finish each one.
        losses: list[Any] = []
        kl_and_clip: list[Any] = []
        for last_epoch, minibatch in self._minibatches(batch, advantages):
            policy_loss, vf_loss, ratio, log_ratio = step(minibatch)
            losses.append((policy_loss, vf_loss))
            if last_epoch:  # how far the policy moved, measured during the final pass
                kl = ((ratio - 1) - log_ratio).mean()  # the k3 estimator (CleanRL, SB3)
                kl_and_clip.append((kl, (abs(ratio - 1) > c["clip_param"]).float().mean()
                                    if numpy_update is None else (abs(ratio - 1) > c["clip_param"]).mean(dtype=np.float32)))
        (policy_loss, vf_loss), (approx_kl, clip_fraction) = _means(losses), _means(kl_and_clip)
        with torch.no_grad():
            mb = c["minibatch_size"]
            actions = self.policy.actions_tensor(self._tensor(batch.actions[:mb].reshape(min(mb, n), -1)))
            _, entropy, _ = self.policy.evaluate(self._tensor(batch.obs[:mb]), actions)
        return {
            "policy_loss": policy_loss,
            "vf_loss": vf_loss,
            "entropy": float(entropy.mean()),
            "approx_kl": approx_kl,
            "clip_fraction": clip_fraction,
            "cur_lr": self.current_lr(),
            "num_sgd_updates": len(losses),
            "stale_fraction": batch.stale_steps / max(n, 1),
            "is_weight_mean": float(batch.is_weight.mean()) if n else 1.0,
        }

    def _minibatches(self, batch: TrainBatch, advantages: np.ndarray) -> Iterator[tuple[bool, tuple[Any, ...]]]:
        """(whether in the last epoch, minibatch) for ``num_epochs`` passes over the batch in a new
        random order each, as :meth:`_numpy_step` and :meth:`_autograd_step` take them (arrays
        for the numpy learner, tensors on the learner's device for torch).

        Three tables are gathered once per epoch: observations and actions by row, and the four
        per-step numbers (old log-probabilities, old values, value targets, advantages) as rows
        of one (4, n) table, so that a minibatch's columns are contiguous slices, four views in
        one call: an update is made of calls at these sizes."""
        import torch

        c = self.cfg
        n = len(advantages)
        num_minibatches = max(1, round(n / c["minibatch_size"]))
        bounds = [round(i * n / num_minibatches) for i in range(num_minibatches + 1)]
        in_numpy = self._numpy_update is not None
        obs: Any = np.asarray(batch.obs, dtype=np.float32).reshape(n, -1)
        actions: Any = np.asarray(batch.actions, dtype=np.float32).reshape(n, -1)
        per_step: Any = np.stack([batch.logp, batch.values, batch.returns, advantages]).astype(np.float32)
        if not in_numpy:
            obs, actions, per_step = (torch.from_numpy(a).to(self.device) for a in (obs, actions, per_step))
        for epoch in range(c["num_epochs"]):
            order = torch.randperm(n, generator=self.torch_rng)
            index: Any
            if in_numpy:
                index = order.numpy()
                epoch_actions: Any = actions[index, 0].astype(np.int64)
            else:
                index = order.to(self.device)
                epoch_actions = self.policy.actions_tensor(actions[index])
            epoch_obs, epoch_per_step = obs[index], per_step[:, index]
            for start, stop in zip(bounds[:-1], bounds[1:]):
                old_logp, old_values, returns, adv = _rows(epoch_per_step[:, start:stop])
                yield epoch == c["num_epochs"] - 1, (epoch_obs[start:stop], epoch_actions[start:stop],
                                                     old_logp, old_values, returns, adv)

    def _numpy_step(self, minibatch: tuple[np.ndarray, ...]) -> tuple[float, float, np.ndarray, np.ndarray]:
        """One SGD update in numpy, gradient by hand (algorithms/ppo_numpy.py). ``minibatch``:
        observations (B, obs_dim), integer actions (B,), old log-probabilities, old values, value
        targets and advantages (B,)."""
        c = self.cfg
        obs, actions, old_logp, old_values, returns, adv = minibatch
        update = self._numpy_update
        assert update is not None  # learn_on_batch steps in numpy only with the numpy learner
        out = update.loss_and_grad(obs, actions, old_logp, old_values, returns, adv,
                                   c["clip_param"], c["vf_clip_param"], c["vf_loss_coeff"], c["entropy_coeff"])
        self.optimizer.step_flat(update.grad, c["max_grad_norm"])
        return out

    def _autograd_step(self, minibatch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One SGD update through autograd and the torch optimiser: any network, any action space, any
        device. ``minibatch`` as :meth:`_numpy_step`'s, the actions as the policy's
        ``actions_tensor`` makes them."""
        import torch

        from algorithms.ppo_loss import ppo_losses

        c = self.cfg
        clip, vf_clip, vf_coeff, ent_coeff = c["clip_param"], c["vf_clip_param"], c["vf_loss_coeff"], c["entropy_coeff"]
        obs, actions, old_logp, old_values, target, adv = minibatch
        logp, entropy, values = self.policy.evaluate(obs, actions, with_entropy=ent_coeff > 0)
        # The clipped surrogate -mean(min(r A, clip(r) A)) and the value loss, one graph node
        # (algorithms/ppo_loss.py); with vf_clip, V is clipped around its sampling-time value
        # and the pessimistic max taken (CleanRL's clip_vloss; SB3's clip_range_vf takes the
        # clipped value alone).
        loss, policy_loss, vf_loss, ratio, log_ratio = ppo_losses(
            logp, values, old_logp=old_logp, advantages=adv, targets=target, old_values=old_values,
            clip=clip, vf_clip=vf_clip, vf_coeff=vf_coeff)
        if entropy is not None:
            loss = loss - ent_coeff * entropy.mean()
        flat = self._flat
        if flat is not None:
            flat.zero_grad()
        else:
            self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c["max_grad_norm"] is not None:
            if flat is not None:
                flat.clip_grad_norm_(c["max_grad_norm"])
            else:
                torch.nn.utils.clip_grad_norm_(self._params, c["max_grad_norm"])
        self._optimizer_step()
        return policy_loss, vf_loss, ratio, log_ratio

    # -- state ------------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        if self.learner_name == "numpy":  # FlatAdam's state, saved as torch.optim.Adam's
            optimizer = {"name": "adam", "state": self.optimizer.torch_adam_state()}
        else:
            state = to_cpu(self.optimizer.state_dict()["state"])
            if self._flat is not None:  # saved per parameter, whichever layout the learner had
                state = self._flat.split_state(state)
            optimizer = {"name": self.cfg["optimizer"], "state": state}
        return {"optimizer": optimizer, "torch_rng": self.torch_rng.get_state()}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        """The optimiser's state from a checkpoint of either learner; a checkpoint of another
        optimiser (a PBT donor with other keys, say) leaves this one's state fresh."""
        saved = state.get("optimizer")
        name = "adam" if self.learner_name == "numpy" else self.cfg["optimizer"]
        if saved is not None and saved["name"] == name:
            if self.learner_name == "numpy":
                self.optimizer.load_torch_adam_state(saved["state"])
            else:  # the moments only: the hyperparameters are this trial's config's
                moments = self._flat.join_state(saved["state"]) if self._flat is not None else saved["state"]
                current = self.optimizer.state_dict()
                self.optimizer.load_state_dict({**current, "state": moments})  # onto the parameters' device
        self.torch_rng.set_state(state["torch_rng"])
        self._apply_lr()  # our config's lr (and schedule) wins over the one saved with the optimiser

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # entropy_coeff, clip_param, gamma, lambda_, batch shape... are read from self.cfg at
        # every iteration; the learning rate lives in the optimiser too.
        self._apply_lr()


def _means(rows: list[tuple[Any, ...]]) -> list[float]:
    """Column means of rows of scalars (floats, numpy scalars or 0-d tensors on any device), as
    floats: one transfer for tensors."""
    torch = sys.modules.get("torch")  # tensors come only from a learner that imported it
    if rows and torch is not None and isinstance(rows[0][0], torch.Tensor):
        return torch.stack([value for row in rows for value in row]).view(len(rows), -1).mean(0).tolist()
    return np.mean(np.asarray(rows, dtype=np.float64), axis=0).tolist()


def _rows(table: Any) -> Any:
    """The rows of a 2-d array or tensor as views (a tensor's ``unbind``: one call, where
    iterating a tensor goes through Python per row)."""
    return table.unbind(0) if hasattr(table, "unbind") else table


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


def _numpy_learner_blocker(c: dict[str, Any], action_space: Any = None) -> str | None:
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
