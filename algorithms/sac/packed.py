"""SAC trials as members of a pack: the trial side of ``PopulationSAC`` (``tune.run``'s ``pack_trials``).

:func:`pack_signature` says whether a SAC config can be a member (a flat Box observation with
bounded Box actions, sampling in the learner's process, nothing set that the population learner
does not do, and an actor that stacks: the built-in MLP, or a user's module that runs under
``torch.func.vmap``) and which configs share a pack: those of equal signature
(:data:`~algorithms.sac.population.SIGNATURE`: env, networks, envs, replay, batch and the
iteration's cadence). :class:`PackedSAC` is the trainable each member runs in its pack's actor
(``algorithms/core/packed_member.py``).

A member's checkpoint is a SAC checkpoint (actor, critics, temperature, target critics, the three
Adam states, counters): ``load_agent`` and ``SAC.from_checkpoint`` load it, and a sweep resumed
with ``pack_trials=False`` continues it as an unpacked SAC trial (and the other way round). As an
unpacked trial's by default, it holds no replay buffer.
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping


from algorithms.core.packed_member import PackedMember, off_policy_signature
from algorithms.core.trainer import DistributedTrainer
from algorithms.sac.population import PER_MEMBER, SIGNATURE, PopulationSAC, build_networks
from algorithms.sampling.population_envs import WINDOW

__all__ = ["PackedSAC", "load_sac_state", "member_config", "pack_signature", "sac_state"]

def pack_signature(trainer: type[DistributedTrainer], config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
    """``(signature, how)`` for a trial of SAC (``trainer``) and ``config`` that can be a pack's
    member, else ``(None, why not)`` (see ``Trainable.pack_signature``)."""
    import gymnasium as gym

    return off_policy_signature(trainer, config, SIGNATURE, PER_MEMBER, member_config,
                                lambda member, obs_space, act_space: build_networks(member, obs_space, act_space)[0], "actor and critics", actions=gym.spaces.Box)


def member_config(c: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved SAC config as a ``PopulationSAC`` member's (``seed`` None stays None)."""
    member = {key: c[key] for key in SIGNATURE if key not in ("hidden_sizes", "activation", "model", "model_config")}
    model = c["model"]
    sizes = {"hidden_sizes": c["hidden_sizes"], "activation": c["activation"]} if callable(model) else model
    member.update(model=model if callable(model) else None, model_config=dict(c["model_config"]) if callable(model) else {},
                  hidden_sizes=list(sizes["hidden_sizes"]), activation=sizes["activation"])
    member.update({key: c[key] for key in PER_MEMBER})
    return member


class PackedSAC(PackedMember):
    """A SAC trial as one member of its pack's ``PopulationSAC`` (see the module docstring)."""

    algorithm = "SAC"
    signature = SIGNATURE

    def member_config(self, c: Mapping[str, Any]) -> dict[str, Any]:
        return member_config(c)

    def build_population(self, members: list[dict[str, Any]]) -> PopulationSAC:
        return PopulationSAC(members)

    def member_state(self, population: Any, slot: int, seed: int) -> dict[str, Any]:
        return sac_state(population, slot, seed)

    def load_member_state(self, population: Any, slot: int, state: Mapping[str, Any]) -> None:
        load_sac_state(population, slot, state)


_ALPHA = [("log_alpha", 0, ())]  # the temperature's one parameter, as its optimiser numbers it


def sac_state(population: PopulationSAC, m: int, seed: int) -> dict[str, Any]:
    """Member ``m``'s state as a SAC trainer's checkpoint (``trainer_state.pt``) holds it."""
    import torch

    actor, critic, adams = population.actor, population.critic, population.adams
    counts = population.envs.counts(m)
    episodes = counts["episodes"]
    policy = {**{f"actor.{k}": v for k, v in actor.state_dict(m).items()},
              **{f"critic.{k}": v for k, v in critic.state_dict(m).items()},
              "log_alpha": torch.tensor(float(population.log_alpha[m, 0]))}
    return {
        "format": 1, "algorithm": "SAC", "policy": policy,
        "counters": {"env_steps_total": counts["env_steps"], "seed": seed},
        "episode_window": {"returns": [r for r, _ in episodes], "lens": [n for _, n in episodes],
                           "episodes_total": counts["episodes_total"]},
        "learner": {"optimizers": {"actor": adams["actor"].torch_state(m, actor.named_slices()),
                                   "critic": adams["critic"].torch_state(m, critic.named_slices()),
                                   "alpha": adams["alpha"].torch_state(m, _ALPHA)},
                    "torch_rng": torch.Generator().manual_seed(seed).get_state(),
                    "replay_rng": population.replay_rngs[m].bit_generator.state,
                    "num_updates": int(population.num_updates[m]), "buffer": None,
                    "target": critic.state_dict(m, population.target)},
        "evaluation": None, "normalizer": None,
    }


def load_sac_state(population: PopulationSAC, m: int, state: Mapping[str, Any]) -> None:
    """Member ``m`` takes a SAC checkpoint's state (:func:`sac_state`'s, or an unpacked SAC trial's
    of the same networks); a network of another shape is a ValueError naming ``pack_trials``."""
    actor, critic, adams = population.actor, population.critic, population.adams
    policy, learner = state["policy"], state["learner"]
    critic.load_state_dict(m, learner["target"], population.target)  # the critics' buffers win, below
    actor.load_state_dict(m, {k[6:]: v for k, v in policy.items() if k.startswith("actor.")})
    critic.load_state_dict(m, {k[7:]: v for k, v in policy.items() if k.startswith("critic.")})
    population.log_alpha[m, 0] = float(policy["log_alpha"])
    optimizers = learner["optimizers"]
    adams["actor"].load_torch_state(m, optimizers.get("actor") or {}, actor.named_slices())
    adams["critic"].load_torch_state(m, optimizers.get("critic") or {}, critic.named_slices())
    adams["alpha"].load_torch_state(m, optimizers.get("alpha") or {}, _ALPHA)
    population.load_replay_state(m, learner)
    window = state["episode_window"]
    population.restart_counts(m, int(state["counters"]["env_steps_total"]), int(window.get("episodes_total", 0)),
                              list(zip(window["returns"], window["lens"]))[-WINDOW:])
