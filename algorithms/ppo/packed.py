"""PPO trials as members of a pack: the trial side of ``PopulationPPO`` (``tune.run``'s ``pack_trials``).

:func:`pack_signature` says whether a PPO config can be a member (on a flat Box observation with
Discrete actions, sampling in the learner's process, nothing set that the population learner does
not do, and a network that stacks: the built-in separate tanh MLP, or a user's module that runs
under ``torch.func.vmap``) and which configs share a pack: those of equal signature
(:data:`~algorithms.ppo.population.SIGNATURE`: env, network, envs, batch, minibatch, epochs).
:class:`PackedPPO` is the trainable each member runs in its pack's actor
(``algorithms/core/packed_member.py``: it joins the pack's population in a slot, and its step,
checkpoint, restore and config changes are that slot's).

A member's checkpoint is a PPO checkpoint (the same files, policy and Adam state): ``load_agent``
and ``PPO.from_checkpoint`` load it, and a sweep resumed with ``pack_trials=False`` continues it as
an unpacked PPO trial (and the other way round).
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping

import numpy as np

from algorithms.core.packed_member import PackedMember, member_blocker, shape_value
from algorithms.core.trainer import DistributedTrainer
from algorithms.ppo.population import PER_MEMBER, SIGNATURE, PopulationPPO
from algorithms.sampling.population_envs import WINDOW

__all__ = ["PackedPPO", "member_config", "pack_signature"]


def pack_signature(trainer: type[DistributedTrainer], config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
    """``(signature, how)`` for a trial of PPO (``trainer``) and ``config`` that can be a pack's
    member, else ``(None, why not)`` (see ``Trainable.pack_signature``)."""
    prepared = trainer.prepare_trial(config)
    c = prepared.config
    why_not = member_blocker(trainer, c, prepared, set(SIGNATURE) | set(PER_MEMBER))
    if why_not is not None:
        return None, why_not
    if c["train_batch_size"] % c["num_envs_per_worker"]:
        return None, (f"train_batch_size ({c['train_batch_size']}) is not a multiple of num_envs_per_worker "
                      f"({c['num_envs_per_worker']})")
    model = c["model"]
    if callable(model):
        from algorithms.ppo.population_module import stack_check

        why_not = stack_check(model, c["model_config"], prepared.observation_space, prepared.action_space,
                              shape_value(model))
        if why_not is not None:
            return None, f"config key 'model' is {getattr(model, '__qualname__', model)}: {why_not}"
        network = f"{getattr(model, '__qualname__', model)}'s module a member, stacked with torch.func" + (
            " on its GPU" if c["num_gpus_for_learner"] else "")
    else:
        if model.get("activation") != "tanh" or model.get("shared_layers"):
            return None, f"config key 'model' is {dict(model)!r}: a packed member is the built-in separate tanh MLP"
        if c["learner"] == "torch":
            return None, "config key 'learner' is 'torch': a pack of the built-in MLP learns as the numpy learner"
        network = f"a {list(model['hidden_sizes'])} MLP a member, " + (
            "stacked with torch.func on its GPU" if c["num_gpus_for_learner"] else "one numpy learner")
    member = member_config(c)
    signature = tuple(shape_value(member[key]) for key in SIGNATURE)
    envs = member["num_envs_per_worker"]
    return signature, f"PPO on {c['env']!r}, {envs} env{'s' * (envs != 1)} and {network} a pack"


def member_config(c: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved PPO config as a ``PopulationPPO`` member's (``seed`` None stays None)."""
    member = {key: c[key] for key in SIGNATURE if key not in ("hidden_sizes", "model", "model_config")}
    if callable(c["model"]):
        member.update(model=c["model"], model_config=dict(c["model_config"]), hidden_sizes=SIGNATURE["hidden_sizes"])
    else:
        member.update(model=None, model_config={}, hidden_sizes=list(c["model"]["hidden_sizes"]))
    member.update({key: c[key] for key in PER_MEMBER})
    if member["max_grad_norm"] is None:  # off
        member["max_grad_norm"] = float("inf")
    return member


class PackedPPO(PackedMember):
    """A PPO trial as one member of its pack's ``PopulationPPO`` (see the module docstring)."""

    algorithm = "PPO"
    signature = SIGNATURE

    def member_config(self, c: Mapping[str, Any]) -> dict[str, Any]:
        return member_config(c)

    def build_population(self, members: list[dict[str, Any]]) -> PopulationPPO:
        return PopulationPPO(members)

    def member_state(self, population: Any, slot: int, seed: int) -> dict[str, Any]:
        return ppo_state(population, slot, seed)

    def load_member_state(self, population: Any, slot: int, state: Mapping[str, Any]) -> None:
        load_ppo_state(population, slot, state)


def ppo_state(population: PopulationPPO, m: int, seed: int) -> dict[str, Any]:
    """Member ``m``'s state as a PPO trainer's checkpoint (``trainer_state.pt``) holds it."""
    import torch

    nets, slices = population.nets, population.nets.named_slices()
    row = nets.row(m)
    policy = {name: torch.from_numpy(row[offset:offset + int(np.prod(shape))].reshape(shape).copy())
              for name, offset, shape in slices}
    policy.update(nets.buffers(m))
    episodes = list(population.episodes[m])
    return {
        "format": 1, "algorithm": "PPO", "policy": policy,
        "counters": {"env_steps_total": int(population.env_steps[m]), "seed": seed},
        "episode_window": {"returns": [r for r, _ in episodes], "lens": [n for _, n in episodes],
                           "episodes_total": int(population.episodes_total[m])},
        "learner": {"optimizer": {"name": "adam", "state": population.adam.torch_state(m, slices)},
                    "torch_rng": torch.Generator().manual_seed(seed).get_state()},
        "evaluation": None, "normalizer": None,
    }


def load_ppo_state(population: PopulationPPO, m: int, state: Mapping[str, Any]) -> None:
    """Member ``m`` takes a PPO checkpoint's state (:func:`ppo_state`'s, or an unpacked PPO trial's
    of the same network); a network of another shape is a ValueError naming ``pack_trials``."""
    nets, slices = population.nets, population.nets.named_slices()
    policy, row = state["policy"], nets.row(m)
    for name, offset, shape in slices:
        value = policy.get(name)
        if value is None or tuple(value.shape) != shape:
            raise ValueError(f"pack_trials: the checkpoint's network does not fit this pack's members "
                             f"({name}: {None if value is None else tuple(value.shape)} against {shape})")
        row[offset:offset + int(np.prod(shape))] = value.reshape(-1).numpy()
    nets.set_row(m, row)
    nets.load_buffers(m, policy)
    adam = (state.get("learner") or {}).get("optimizer") or {}
    population.adam.load_torch_state(m, adam.get("state", {}) if adam.get("name") == "adam" else {}, slices)
    window = state["episode_window"]
    population.restart_counts(m, int(state["counters"]["env_steps_total"]), int(window.get("episodes_total", 0)),
                              list(zip(window["returns"], window["lens"]))[-WINDOW:])
