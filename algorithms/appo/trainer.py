"""APPO (RLlib's asynchronous PPO), as a trial that owns its rollout actors.

IMPALA (``algorithms/impala/trainer.py``: streaming rollout actors, a bounded queue, V-trace) with
PPO's clipped surrogate for the policy loss, as RLlib's APPO computes it. The learner keeps a
*target* copy of its policy, refreshed every ``target_network_update_freq`` gradient steps: V-trace
takes it as the target policy, and the surrogate's ratio is ``pi / pi_target``, written
``min(mu / pi_target, target_worker_clipping) * pi / mu`` for the behaviour policy ``mu`` that sampled
the steps, clipped to ``1 +- clip_param``. So an update is trusted around a policy a few steps
old however stale the actors' weights, and each batch may be passed over ``num_epochs`` times.

    from algorithms import APPO
    trainer = APPO(config={"env": "CartPole-v1", "num_workers": 2})
    result = trainer.train()
"""

from __future__ import annotations

import copy
from typing import Any

from algorithms.core.common_config import check
from algorithms.core.learner_config import to_cpu
from algorithms.impala.trainer import IMPALA, IMPALA_DEFAULTS, FragmentRows
from schedulers.validation import is_int, is_number

APPO_DEFAULTS: dict[str, Any] = {
    **IMPALA_DEFAULTS,
    "clip_param": 0.4,
    # gradient steps between two copies of the policy into the target policy
    "target_network_update_freq": 2,
    # mu / pi_target, clipped at this, in the surrogate's ratio
    "target_worker_clipping": 2.0,
    "num_epochs": 1,  # gradient steps on each batch
}


class APPO(IMPALA):
    """IMPALA with PPO's clipped surrogate against a target policy (see the module docstring).

    A ``tune.Trainable``: ``tune.run("APPO", config={"env": ...})``. See ``APPO_DEFAULTS``.
    """

    _name = "APPO"
    _defaults = APPO_DEFAULTS

    target: Any  # a TorchPolicy: the policy as it was at the last copy

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        check(is_number(c["clip_param"]) and c["clip_param"] > 0, "clip_param", "must be a number > 0", c["clip_param"])
        check(is_number(c["target_worker_clipping"]) and c["target_worker_clipping"] > 0, "target_worker_clipping",
              "must be a number > 0", c["target_worker_clipping"])
        for key in ("target_network_update_freq", "num_epochs"):
            check(is_int(c[key]) and c[key] >= 1, key, "must be an int >= 1", c[key])

    def build_learner(self) -> None:
        super().build_learner()
        self.target = copy.deepcopy(self.policy)
        self.target.module.requires_grad_(False)

    def passes_per_batch(self) -> int:
        return int(self.cfg["num_epochs"])

    def after_gradient_step(self) -> None:
        if self.num_learner_updates % self.cfg["target_network_update_freq"] == 0:
            self.target.load_state_dict(self.policy.state_dict())

    def target_logp(self, rows: FragmentRows, logp: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.target.evaluate(rows.obs, rows.actions, with_entropy=False)[0]

    def policy_loss(self, rows: FragmentRows, logp: Any, advantages: Any) -> Any:
        import torch

        mask, clip = rows.loss_mask, self.cfg["clip_param"]
        behaviour = rows.behaviour_logp[mask]
        old = self.target_logp(rows, None)[mask]
        is_ratio = torch.clamp((behaviour - old).exp(), 0.0, self.cfg["target_worker_clipping"])
        ratio = is_ratio * (logp - behaviour).exp()
        return -torch.minimum(advantages * ratio, advantages * ratio.clamp(1 - clip, 1 + clip)).mean()

    def learner_state(self) -> dict[str, Any]:
        return {**super().learner_state(), "target": to_cpu(self.target.state_dict())}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        super().load_learner_state(state)
        self.target.load_state_dict(state["target"])
