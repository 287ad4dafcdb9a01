"""PPO trials as members of a pack: the trial side of ``PopulationPPO`` (``tune.run``'s ``pack_trials``).

:func:`pack_signature` says whether a PPO config can be a member (on a flat Box observation with
Discrete actions, sampling in the learner's process, nothing set that the population learner does
not do, and a network that stacks: the built-in separate tanh MLP, or a user's module that runs
under ``torch.func.vmap``) and which configs share a pack: those of equal signature
(:data:`~algorithms.ppo.population.SIGNATURE`: env, network, envs, batch, minibatch, epochs). :class:`PackedPPO` is the trainable each member runs in its pack's actor (see
``tuner.trainable.pack``): it joins the pack's population in a slot, and its step, checkpoint,
restore and config changes are that slot's.

A member's checkpoint is a PPO checkpoint (the same files, policy and Adam state): ``load_agent``
and ``PPO.from_checkpoint`` load it, and a sweep resumed with ``pack_trials=False`` continues it as
an unpacked PPO trial (and the other way round).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Hashable, Mapping

import numpy as np

from algorithms.core.agent import write_agent_file
from algorithms.core.resolved_trial import ResolvedTrial, same_config
from algorithms.core.trainer import STATE_FILE, DistributedTrainer
from algorithms.ppo.population import PER_MEMBER, SIGNATURE, PopulationPPO, shape_value
from algorithms.sampling.population_envs import WINDOW
from tuner.trainable import pack as packs
from tuner.trainable.trainable import Trainable
from tuner.trainable.checkpoint import atomic_file

__all__ = ["PackedPPO", "member_config", "pack_signature"]

#: Keys a member may set to anything (its resources; which of PPO's learners it would use alone).
_FREE = {"seed", "learner", "num_cpus_for_learner", "num_cpus_per_worker", "preprocessing", "model", "hidden_sizes",
         "activation"}


def pack_signature(trainer: type[DistributedTrainer], config: Mapping[str, Any]) -> tuple[Hashable | None, str]:
    """``(signature, how)`` for a trial of PPO (``trainer``) and ``config`` that can be a pack's
    member, else ``(None, why not)`` (see ``Trainable.pack_signature``)."""
    import gymnasium as gym

    prepared = trainer.prepare_trial(config)
    c, default = prepared.config, trainer.resolve_config({"env": prepared.config["env"]})
    model = c["model"]
    if not (isinstance(model, Mapping) or callable(model)):
        return None, f"config key 'model' is {model!r}: a packed member is the built-in MLP or a module factory"
    if c["num_workers"] != 0:  # said first: what "auto" set with it follows from it
        return None, f"config key 'num_workers' is {c['num_workers']!r}: a packed member samples in its pack's process (0)"
    for key in sorted(k for k in set(c) - set(SIGNATURE) - set(PER_MEMBER) - _FREE if not k.startswith("_")):
        if repr(c[key]) != repr(default.get(key)):
            return None, f"config key {key!r} is {c[key]!r}: a packed member runs with its default {default.get(key)!r}"
    obs, act = prepared.observation_space, prepared.action_space
    if not (isinstance(obs, gym.spaces.Box) and len(obs.shape) == 1 and isinstance(act, gym.spaces.Discrete)):
        return None, f"its env has {obs} and {act}: a packed member takes a flat Box observation and Discrete actions"
    if c["train_batch_size"] % c["num_envs_per_worker"]:
        return None, (f"train_batch_size ({c['train_batch_size']}) is not a multiple of num_envs_per_worker "
                      f"({c['num_envs_per_worker']})")
    if callable(model):
        from algorithms.ppo.population_module import stack_check

        why_not = stack_check(model, c["model_config"], obs, act, shape_value(model))
        if why_not is not None:
            return None, f"config key 'model' is {getattr(model, '__qualname__', model)}: {why_not}"
        network = f"{getattr(model, '__qualname__', model)}'s module a member, stacked with torch.func"
    else:
        if model.get("activation") != "tanh" or model.get("shared_layers"):
            return None, f"config key 'model' is {dict(model)!r}: a packed member is the built-in separate tanh MLP"
        if c["learner"] == "torch":
            return None, "config key 'learner' is 'torch': a pack of the built-in MLP learns in numpy"
        network = f"a {list(model['hidden_sizes'])} MLP a member, one numpy learner"
    member = member_config(c)
    signature = tuple(shape_value(member[key]) for key in SIGNATURE)
    return signature, f"PPO on {c['env']!r}, {member['num_envs_per_worker']} envs and {network} a pack"


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


class PackedPPO(Trainable):
    """A PPO trial as one member of its pack's ``PopulationPPO`` (see the module docstring)."""

    def setup(self, config: dict[str, Any]) -> None:
        self._member = member_config(self._resolved(config))
        # the env as the driver resolved it: a registered name's creator travels with the trial
        self._env = self.get_trial_info().prepared.env  # type: ignore[union-attr]
        if self._member["seed"] is None:
            self._member["seed"] = int(np.random.default_rng().integers(2**31))
        self._pack = packs.current_pack()
        self._slot = packs.current_slot()
        self._population: PopulationPPO = self._pack.population(self._build)
        self._pack.join(self._slot, self._member)

    def _resolved(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` as the driver resolved it for this trial (a member runs only in a sweep)."""
        info = self.get_trial_info()
        prepared = getattr(info, "prepared", None)
        if not isinstance(prepared, ResolvedTrial) or not same_config(prepared.given, config):
            raise RuntimeError("packed PPO: a member's config is resolved by the sweep's driver; run PPO itself "
                               "outside a sweep")
        return dict(prepared.config)

    def _build(self) -> PopulationPPO:
        # Every slot starts as this member's shape; a slot learns only once a member joins it.
        return PopulationPPO([{**self._member, "env": self._env, "seed": self._member["seed"] + m}
                              for m in range(self._pack.capacity)])

    def step(self) -> dict[str, Any]:
        result = self._pack.step(self._slot)
        if "error" in result:
            raise FloatingPointError(f"packed PPO: {result['error']}")
        result.update(learner="packed", pack_size=len(self._pack.members), pack_id=f"{socket.gethostname()}:{os.getpid()}",
                      num_workers=0,
                      sampling_layout=f"in a pack of {self._pack.capacity}: {self._member['num_envs_per_worker']} envs")
        return result

    # -- checkpoints: PPO's files ------------------------------------------------------------------
    def save_checkpoint(self, checkpoint_dir: str) -> None:
        import torch

        with self._pack.locked() as population:
            state = ppo_state(population, self._slot, int(self._member["seed"]))
        with atomic_file(os.path.join(checkpoint_dir, STATE_FILE)) as f:
            torch.save(state, f)
        write_agent_file(checkpoint_dir, "PPO", self.config)
        self._pack.remember(self._slot, os.path.abspath(checkpoint_dir), state)  # for a PBT exploit in this pack

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        import torch

        if not isinstance(checkpoint, str):
            raise ValueError(f"packed PPO: expected a checkpoint directory, got {type(checkpoint).__name__}")
        state = self._pack.recall(os.path.abspath(checkpoint))
        if state is None:
            state = torch.load(os.path.join(checkpoint, STATE_FILE), map_location="cpu", weights_only=True)
        with self._pack.locked() as population:
            load_ppo_state(population, self._slot, state)
        self._member["seed"] = int(state["counters"].get("seed", self._member["seed"]))

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        member = member_config(self._resolved(new_config))  # the trial actor set the new config's info
        if any(shape_value(member[key]) != shape_value(self._member[key]) for key in SIGNATURE):
            return False  # another shape: rebuilt (a new member in this slot)
        member["seed"] = self._member["seed"] if member["seed"] is None else member["seed"]
        with self._pack.locked() as population:
            population.configure(self._slot, member)
        self._member = member
        return True

    def cleanup(self) -> None:
        self._pack.leave(self._slot)


def ppo_state(population: PopulationPPO, m: int, seed: int) -> dict[str, Any]:
    """Member ``m``'s state as a PPO trainer's checkpoint (``trainer_state.pt``) holds it."""
    import torch

    nets, slices = population.nets, population.nets.named_slices()
    policy = {name: torch.from_numpy(nets.flat[m, offset:offset + int(np.prod(shape))].reshape(shape).copy())
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
    policy = state["policy"]
    for name, offset, shape in slices:
        value = policy.get(name)
        if value is None or tuple(value.shape) != shape:
            raise ValueError(f"pack_trials: the checkpoint's network does not fit this pack's members "
                             f"({name}: {None if value is None else tuple(value.shape)} against {shape})")
        nets.flat[m, offset:offset + int(np.prod(shape))] = value.reshape(-1).numpy()
    nets.load_buffers(m, policy)
    adam = (state.get("learner") or {}).get("optimizer") or {}
    population.adam.load_torch_state(m, adam.get("state", {}) if adam.get("name") == "adam" else {}, slices)
    window = state["episode_window"]
    population.restart_counts(m, int(state["counters"]["env_steps_total"]), int(window.get("episodes_total", 0)),
                              list(zip(window["returns"], window["lens"]))[-WINDOW:])
