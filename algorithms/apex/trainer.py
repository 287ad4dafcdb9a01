"""Ape-X DQN (Horgan et al. 2018), as a trial that owns its rollout actors.

DQN (``algorithms/dqn/trainer.py``: double Q, dueling heads, n-step targets, a target network) in
Ape-X's layout: several rollout actors that stream without waiting for the learner, each
exploring with its own epsilon from a ladder (actor i of N: ``epsilon ** (1 + 7 (i-1)/(N-1))``,
``epsilon`` 0.4 as in the paper, so some actors mostly exploit and others mostly explore), into
one prioritized replay buffer (a sum-tree in the learner: ``algorithms/data/prioritized_replay.py``).
A transition's first priority is its TD error as the actor that sampled it saw it, from the
actor's own Q values (``EpsilonGreedyQ.record_action_values``), so a surprising transition is
replayed soon without the learner valuing every new step; the learner's updates renew the
priorities of what it replays.

    from algorithms import APEX
    trainer = APEX(config={"env": "CartPole-v1", "num_workers": 4})
    result = trainer.train()
"""

from __future__ import annotations

from typing import Any

from algorithms.core.common_config import check
from algorithms.dqn.trainer import DQN, DQN_DEFAULTS

APEX_DEFAULTS: dict[str, Any] = {
    **DQN_DEFAULTS,
    "num_workers": 4,  # the ladder's rungs (RLlib's default is 32 env runners: a cluster's)
    "sample_async": True,  # the actors stream: none waits for the learner or for another
    "epsilon": [[0, 0.4]],  # the ladder's base (a schedule, as DQN's epsilon)
    "per_worker_exploration": True,
    "prioritized_replay": True,
}


class APEX(DQN):
    """Ape-X DQN: streaming actors on an epsilon ladder, prioritized replay with the actors'
    first priorities (see the module docstring).

    A ``tune.Trainable``: ``tune.run("APEX", config={"env": ...})`` for Discrete action spaces.
    See ``APEX_DEFAULTS`` (DQN's keys, Ape-X's defaults).
    """

    _name = "APEX"
    _defaults = APEX_DEFAULTS
    _actor_priorities = True

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        check(not c["per_worker_exploration"] or c["num_workers"] >= 2, "per_worker_exploration",
              f"an epsilon ladder needs num_workers >= 2 rollout actors (num_workers is {c['num_workers']}); "
              "set per_worker_exploration=False for one epsilon", c["per_worker_exploration"])
