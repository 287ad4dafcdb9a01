"""Augmented Random Search (Mania et al. 2018), as a trial that owns its rollout actors.

ES's machinery (``algorithms/es/trainer.py``: a flat policy, a shared noise table, the rollout
actors playing antithetic pairs of episodes, observations normalised by their running mean and
std) with ARS's update: of the ``num_rollouts`` directions played, the ``rollouts_used`` best (by
the better of their two returns) make a plain gradient step ``theta += sgd_stepsize / (b sigma_R)
sum_k (r_k+ - r_k-) eps_k``, ``sigma_R`` the standard deviation of those 2b returns. The policy is
linear by default (``hidden_sizes`` []), the paper's; the normalisation makes it the paper's V2.

    from algorithms import ARS
    trainer = ARS(config={"env": "Pendulum-v1", "num_workers": 2})
    result = trainer.train()
"""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.core.common_config import check
from algorithms.es.trainer import PERTURBATION_DEFAULTS, PerturbationTrainer
from schedulers.validation import is_int, is_number

ARS_DEFAULTS: dict[str, Any] = {
    **PERTURBATION_DEFAULTS,
    "num_rollouts": 32,  # directions per population (each played as an antithetic pair)
    "rollouts_used": 32,  # b: the best directions the step is made of
    "sgd_stepsize": 0.01,
    "hidden_sizes": [],  # a linear policy
}


class ARS(PerturbationTrainer):
    """ARS: the best directions' return differences, scaled by their spread (see the module docstring).

    A ``tune.Trainable``: ``tune.run("ARS", config={"env": ...})``. See ``ARS_DEFAULTS``.
    """

    _name = "ARS"
    _defaults = ARS_DEFAULTS

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        check(is_int(c["num_rollouts"]) and c["num_rollouts"] >= 1, "num_rollouts", "must be an int >= 1",
              c["num_rollouts"])
        check(is_int(c["rollouts_used"]) and 1 <= c["rollouts_used"] <= c["num_rollouts"], "rollouts_used",
              f"must be an int in [1, num_rollouts ({c['num_rollouts']})]", c["rollouts_used"])
        check(is_number(c["sgd_stepsize"]) and c["sgd_stepsize"] > 0, "sgd_stepsize", "must be a number > 0",
              c["sgd_stepsize"])

    def directions_per_batch(self) -> int:
        return int(self.cfg["num_rollouts"])

    def update(self, indices: np.ndarray, returns: np.ndarray) -> dict[str, float]:
        c = self.cfg
        used = min(int(c["rollouts_used"]), len(indices))
        best = np.argsort(-returns.max(axis=1), kind="stable")[:used]
        spread = float(returns[best].std())
        weights = (returns[best, 0] - returns[best, 1]) / max(spread, 1e-8)
        gradient = weights @ self.perturbation(indices[best]) / used
        before = self.policy.theta.copy()
        self.policy.theta += (float(c["sgd_stepsize"]) * gradient).astype(np.float32)
        step = np.linalg.norm(self.policy.theta - before)
        return {"grad_norm": float(np.linalg.norm(gradient)), "return_std": spread,
                "update_ratio": float(step) / max(float(np.linalg.norm(before)), 1e-12), "cur_lr": float(c["sgd_stepsize"])}
