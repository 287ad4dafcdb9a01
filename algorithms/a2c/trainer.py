"""A2C (Mnih et al. 2016, the synchronous variant), as a trial that owns its rollout actors.

Read top to bottom: config and defaults, then the trainer. An iteration samples
``train_batch_size`` env steps with the current weights (every rollout worker its share, all at
once), turns each fragment into advantages and value targets (GAE: ``algorithms/data/gae.py``;
``lambda`` 1 is A2C's n-step return) and makes one gradient step on the whole batch: the policy
gradient, the value loss and the entropy bonus, RMSprop as in the paper and SB3. The policy is the
trainers' base one (``algorithms/models/torch_policy.py``): the built-in MLP or a module of one's
own, every action and observation space PPO takes.

    from algorithms import A2C
    trainer = A2C(config={"env": "CartPole-v1"})
    result = trainer.train()

Defaults are SB3's (rl-zoo's for CartPole: 8 envs x 5 steps); keys RLlib's where it has them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from algorithms.core.common_config import check
from algorithms.core.learner_config import make_optimizer, set_lr, to_cpu
from algorithms.core.trainer import DistributedTrainer
from algorithms.data.gae import compute_gae
from algorithms.data.observations import to_tensors
from algorithms.sampling.fragment import Fragment, TrainBatch, concat_batches
from schedulers.validation import is_number

A2C_DEFAULTS: dict[str, Any] = {
    "num_envs_per_worker": 8,
    "train_batch_size": 40,  # env steps per update: 5 per env with 8 envs (SB3's n_steps 5)
    "lr": 7e-4,
    "gamma": 0.99,
    "lambda_": 1.0,  # 1: n-step returns bootstrapped at the fragment's end (A2C's); < 1: GAE
    "vf_loss_coeff": 0.5,
    "entropy_coeff": 0.0,
    "max_grad_norm": 0.5,
    "normalize_advantages": False,
    "optimizer": "rmsprop",
    "optimizer_config": {"alpha": 0.99, "eps": 1e-5},
    # the built-in network (shorthands of model={"hidden_sizes": ..., "activation": ...})
    "hidden_sizes": [64, 64],
    "activation": "tanh",
}


class A2C(DistributedTrainer):
    """Synchronous advantage actor-critic: one gradient step on each batch of ``train_batch_size``
    env steps, sampled with the current weights.

    A ``tune.Trainable``: ``tune.run("A2C", config={"env": ...})``. See ``A2C_DEFAULTS`` and
    ``algorithms.core.common_config.COMMON_DEFAULTS`` for the keys; ``lambda`` is accepted for
    ``lambda_``.
    """

    _name = "A2C"
    _defaults = A2C_DEFAULTS
    _aliases = {"lambda": "lambda_"}
    _rebuild_keys = DistributedTrainer._rebuild_keys + ("hidden_sizes", "activation")
    _model_shorthands = ("hidden_sizes", "activation")

    optimizer: Any
    _optimizer_step: Callable[[], None]

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        check(is_number(c["lr"]) and c["lr"] > 0, "lr", "must be a number > 0", c["lr"])
        check(is_number(c["gamma"]) and 0 < c["gamma"] <= 1, "gamma", "must be in (0, 1]", c["gamma"])
        check(is_number(c["lambda_"]) and 0 <= c["lambda_"] <= 1, "lambda", "must be in [0, 1]", c["lambda_"])
        for key in ("vf_loss_coeff", "entropy_coeff"):
            check(is_number(c[key]) and c[key] >= 0, key, "must be a number >= 0", c[key])
        check(c["max_grad_norm"] is None or (is_number(c["max_grad_norm"]) and c["max_grad_norm"] > 0),
              "max_grad_norm", "must be None (off) or a number > 0", c["max_grad_norm"])
        check(isinstance(c["normalize_advantages"], bool), "normalize_advantages", "must be True or False",
              c["normalize_advantages"])
        # A2C learns from batches its current weights sampled: fragments that older weights sampled
        # are what IMPALA and APPO correct for
        check(not given.get("sample_async", False), "sample_async",
              "must be False: A2C is synchronous (IMPALA and APPO learn from asynchronous sampling)",
              given.get("sample_async"))
        c["sample_async"] = False

    # -- the learner ---------------------------------------------------------------------------
    def build_learner(self) -> None:
        from algorithms.optim.optimizer_step import lean_step

        c = self.cfg
        self.optimizer = make_optimizer(list(self.policy.parameters()), c["optimizer"], c["optimizer_config"], c["lr"])
        self._optimizer_step = lean_step(self.optimizer)

    def postprocess_fragments(self, fragments: list[Fragment]) -> TrainBatch:
        """Advantages and value targets of each fragment, bootstrapped from the value of its last
        observation."""
        batches = []
        for fragment in fragments:
            if fragment.last_values is None:  # sampled without values: the learner bootstraps it
                fragment = fragment.replace(last_values=self.policy.value(fragment.last_obs))
            batches.append(compute_gae(fragment, float(self.cfg["gamma"]), float(self.cfg["lambda_"])))
        return concat_batches(batches)

    def learn_on_batch(self, batch: TrainBatch) -> dict[str, float]:
        import torch

        c, n = self.cfg, batch.env_steps
        advantages = batch.advantages
        if c["normalize_advantages"] and n > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8)
        tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(self.device)  # noqa: E731
        actions = self.policy.actions_tensor(tensor(batch.actions.reshape(n, -1)))
        logp, entropy, values = self.policy.evaluate(to_tensors(batch.obs, self.device), actions)
        policy_loss = -(logp * tensor(advantages)).mean()
        vf_loss = 0.5 * (values - tensor(batch.returns)).pow(2).mean()
        loss = policy_loss + c["vf_loss_coeff"] * vf_loss - c["entropy_coeff"] * entropy.mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c["max_grad_norm"] is not None:
            torch.nn.utils.clip_grad_norm_(list(self.policy.parameters()), c["max_grad_norm"])
        self._optimizer_step()
        return {"policy_loss": float(policy_loss.detach()), "vf_loss": float(vf_loss.detach()),
                "entropy": float(entropy.detach().mean()), "cur_lr": float(c["lr"])}

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        set_lr(self.optimizer, float(new["lr"]))  # a PBT exploit's lr, in place; the rest is read every batch

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        return {"optimizer": to_cpu(self.optimizer.state_dict())}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        set_lr(self.optimizer, float(self.cfg["lr"]))  # this trial's lr (a PBT exploit loads a donor's state)
