"""DQN trials as members of a pack: the trial side of ``PopulationDQN`` (``tune.run``'s ``pack_trials``).

:func:`pack_signature` says whether a DQN config can be a member (a flat Box observation with
Discrete actions, sampling in the learner's process, uniform replay, nothing set that the
population learner does not do, and a Q network that stacks: the built-in MLP, or a user's
module that runs under ``torch.func.vmap``) and which configs share a pack: those of equal
signature (:data:`~algorithms.dqn.population.SIGNATURE`: env, network, envs, replay, batch and
the iteration's cadence). :class:`PackedDQN` is the trainable each member runs in its pack's actor
(``algorithms/core/packed_member.py``).

A member's checkpoint is a DQN checkpoint (the same files: Q network, target network, Adam state,
counters): ``load_agent`` and ``DQN.from_checkpoint`` load it, and a sweep resumed with
``pack_trials=False`` continues it as an unpacked DQN trial (and the other way round). As an
unpacked trial's by default, it holds no replay buffer: a restored member samples
``num_steps_sampled_before_learning_starts`` env steps again before it learns.
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping


from algorithms.core.packed_member import PackedMember, off_policy_signature
from algorithms.core.trainer import DistributedTrainer
from algorithms.dqn.population import PER_MEMBER, SIGNATURE, PopulationDQN, build_q
from algorithms.sampling.population_envs import WINDOW

__all__ = ["PackedDQN", "dqn_state", "load_dqn_state", "member_config", "pack_signature"]

def pack_signature(trainer: type[DistributedTrainer], config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
    """``(signature, how)`` for a trial of DQN (``trainer``) and ``config`` that can be a pack's
    member, else ``(None, why not)`` (see ``Trainable.pack_signature``)."""
    return off_policy_signature(trainer, config, SIGNATURE, PER_MEMBER, member_config,
                                lambda member, obs_space, act_space: build_q(member, obs_space, act_space), "Q network")


def member_config(c: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved DQN config as a ``PopulationDQN`` member's (``seed`` None stays None)."""
    member = {key: c[key] for key in SIGNATURE if key not in ("hidden_sizes", "activation", "model", "model_config")}
    if callable(c["model"]):
        member.update(model=c["model"], model_config=dict(c["model_config"]),
                      hidden_sizes=SIGNATURE["hidden_sizes"], activation=SIGNATURE["activation"])
    else:
        member.update(model=None, model_config={}, hidden_sizes=list(c["model"]["hidden_sizes"]),
                      activation=c["model"]["activation"])
    member.update({key: c[key] for key in PER_MEMBER})
    return member


class PackedDQN(PackedMember):
    """A DQN trial as one member of its pack's ``PopulationDQN`` (see the module docstring)."""

    algorithm = "DQN"
    signature = SIGNATURE

    def member_config(self, c: Mapping[str, Any]) -> dict[str, Any]:
        return member_config(c)

    def build_population(self, members: list[dict[str, Any]]) -> PopulationDQN:
        return PopulationDQN(members)

    def member_state(self, population: Any, slot: int, seed: int) -> dict[str, Any]:
        return dqn_state(population, slot, seed)

    def load_member_state(self, population: Any, slot: int, state: Mapping[str, Any]) -> None:
        load_dqn_state(population, slot, state)


def dqn_state(population: PopulationDQN, m: int, seed: int) -> dict[str, Any]:
    """Member ``m``'s state as a DQN trainer's checkpoint (``trainer_state.pt``) holds it."""
    import torch

    q = population.q
    counts = population.envs.counts(m)
    episodes = counts["episodes"]
    return {
        "format": 1, "algorithm": "DQN", "policy": q.state_dict(m),
        "counters": {"env_steps_total": counts["env_steps"], "seed": seed},
        "episode_window": {"returns": [r for r, _ in episodes], "lens": [n for _, n in episodes],
                           "episodes_total": counts["episodes_total"]},
        "learner": {"optimizers": {"q": population.adam.torch_state(m, q.named_slices())},
                    "torch_rng": torch.Generator().manual_seed(seed).get_state(),
                    "replay_rng": population.replay_rngs[m].bit_generator.state,
                    "num_updates": int(population.num_updates[m]), "buffer": None,
                    "last_target_update": int(population.last_target_update[m]),
                    "target": q.state_dict(m, population.target)},
        "evaluation": None, "normalizer": None,
    }


def load_dqn_state(population: PopulationDQN, m: int, state: Mapping[str, Any]) -> None:
    """Member ``m`` takes a DQN checkpoint's state (:func:`dqn_state`'s, or an unpacked DQN trial's
    of the same network); a network of another shape is a ValueError naming ``pack_trials``."""
    q, learner = population.q, state["learner"]
    q.load_state_dict(m, learner["target"], population.target)  # the online network's buffers win, below
    q.load_state_dict(m, state["policy"])
    population.adam.load_torch_state(m, learner["optimizers"].get("q") or {}, q.named_slices())
    population.last_target_update[m] = int(learner["last_target_update"])
    population.load_replay_state(m, learner)
    window = state["episode_window"]
    population.restart_counts(m, int(state["counters"]["env_steps_total"]), int(window.get("episodes_total", 0)),
                              list(zip(window["returns"], window["lens"]))[-WINDOW:])
