"""A trial as one member of a pack's population learner: what packed PPO and DQN trials share.

A trainer that packs (``Trainable.pack_signature``) has a population learner (PPO's
``algorithms/ppo/population.py``, DQN's ``algorithms/dqn/population.py``) and a
:class:`PackedMember` subclass that runs in its pack's actor (``tuner.trainable.pack``): it joins
the population in a slot, and its step, checkpoint, restore and config changes are that slot's.
A member's checkpoint is its trainer's (the same files and state): ``load_agent`` loads it, and a
sweep resumed with ``pack_trials=False`` continues it as an unpacked trial (and the other way).

:func:`member_blocker` is the part of ``pack_signature`` the trainers share: the reasons a
resolved config cannot be a member, whatever the algorithm.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Callable, ClassVar, Hashable, Mapping

import numpy as np

from algorithms.core.agent import write_agent_file
from algorithms.core.resolved_trial import ResolvedTrial, same_config
from algorithms.core.trainer import STATE_FILE, DistributedTrainer
from tuner.trainable import pack as packs
from tuner.trainable.checkpoint import atomic_file
from tuner.trainable.trainable import Trainable

__all__ = ["PackedMember", "member_blocker", "off_policy_signature", "shape_value"]

#: Keys a member may set to anything: its resources, which learner it would use alone, the
#: built-in network's shorthands (the signature has the network itself).
FREE = {"seed", "learner", "num_cpus_for_learner", "num_cpus_per_worker", "preprocessing", "model", "hidden_sizes",
        "activation"}


def shape_value(value: Any) -> str:
    """A signature key's value as members compare it: a callable (a user's model factory) by its
    definition, since each member's copy arrives by pickle as an object of its own; else its repr."""
    code = getattr(value, "__code__", None)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}:{code.co_firstlineno if code else ''}"
    return repr(value)


def member_blocker(trainer: type[DistributedTrainer], c: Mapping[str, Any], prepared: Any,
                   own_keys: set[str], actions: type | None = None) -> str | None:
    """Why a trial of ``trainer`` with the resolved config ``c`` cannot be a member, or None:
    a network that is neither the built-in one nor a module factory, rollout actors (a member
    samples in its pack's process), a key outside ``own_keys`` (the population's signature and
    per-member keys) set off its default, an env other than a flat Box observation with actions of
    the ``actions`` space (default Discrete; a Box's bounded)."""
    import gymnasium as gym

    actions = gym.spaces.Discrete if actions is None else actions
    model = c["model"]
    if not (isinstance(model, Mapping) or callable(model)):
        return f"config key 'model' is {model!r}: a packed member is the built-in network or a module factory"
    if c["num_workers"] != 0:  # said first: what "auto" set with it follows from it
        return f"config key 'num_workers' is {c['num_workers']!r}: a packed member samples in its pack's process (0)"
    default = trainer.resolve_config({"env": c["env"]})
    for key in sorted(k for k in set(c) - own_keys - FREE if not k.startswith("_")):
        if repr(c[key]) != repr(default.get(key)):
            return f"config key {key!r} is {c[key]!r}: a packed member runs with its default {default.get(key)!r}"
    obs, act = prepared.observation_space, prepared.action_space
    bounded = not isinstance(act, gym.spaces.Box) or bool(np.all(np.isfinite(act.low)) and np.all(np.isfinite(act.high)))
    if not (isinstance(obs, gym.spaces.Box) and len(obs.shape) == 1 and isinstance(act, actions) and bounded):
        kind = "bounded Box" if actions is gym.spaces.Box else actions.__name__
        return f"its env has {obs} and {act}: a packed member takes a flat Box observation and {kind} actions"
    return None


_stacks: dict[tuple[str, ...], str | None] = {}  # a module's stack check, once per definition and spaces


def off_policy_signature(trainer: type[DistributedTrainer], config: Mapping[str, Any], signature: Mapping[str, Any],
                         per_member: Mapping[str, Any], member_config: Callable[[Mapping[str, Any]], dict[str, Any]],
                         user_module: Callable[[dict[str, Any], Any, Any], Any], networks: str,
                         actions: type | None = None) -> tuple[Hashable | None, str]:
    """``pack_signature`` of an off-policy trainer whose networks are stacked copies (DQN, SAC):
    ``(signature, how)`` when a trial of ``config`` can be a member, else ``(None, why not)``.
    ``user_module(member, observation_space, action_space)`` builds the module a ``model``
    factory makes (tried under ``vmap`` once per factory); ``networks`` names the member's networks."""
    prepared = trainer.prepare_trial(config)
    c = prepared.config
    why_not = member_blocker(trainer, c, prepared, set(signature) | set(per_member), actions=actions)
    if why_not is not None:
        return None, why_not
    member = member_config(c)
    model = c["model"]
    if callable(model):
        name = getattr(model, "__qualname__", repr(model))
        obs_space, act_space = prepared.observation_space, prepared.action_space
        key = (shape_value(model), repr(member["model_config"]), repr(obs_space), repr(act_space))
        if key not in _stacks:
            _stacks[key] = _stack_failure(member, obs_space, act_space, user_module)
        if _stacks[key] is not None:
            return None, f"config key 'model' is {name}: {_stacks[key]}"
        networks = f"{name}'s {networks}"
    else:
        networks = f"{list(member['hidden_sizes'])} {networks}"
    key_values = tuple(shape_value(member[key]) for key in signature)
    envs = member["num_envs_per_worker"]
    on_gpu = " on its GPU" if member["num_gpus_for_learner"] else ""
    return key_values, (f"{trainer._name} on {c['env']!r}, {envs} env{'s' * (envs != 1)}, a replay buffer and "
                        f"{networks} a member, stacked with torch.func a pack{on_gpu}")


def _stack_failure(member: Mapping[str, Any], obs_space: Any, act_space: Any,
                   user_module: Callable[[dict[str, Any], Any, Any], Any]) -> str | None:
    """None when two copies of the module a member's ``model`` builds stack and learn under ``vmap``."""
    import torch

    from algorithms.models.stacked import stack_failure

    try:
        modules = [user_module({**member, "seed": seed}, obs_space, act_space) for seed in (0, 1)]
    except ValueError as error:  # the module breaks the contract: the unpacked trial says how
        return str(error)
    obs = torch.from_numpy(np.stack([np.stack([obs_space.sample() for _ in range(4)]) for _ in range(2)])).float()
    return stack_failure(modules, obs)


class PackedMember(Trainable):
    """A trial as one member of its pack's population (see the module docstring). A subclass
    gives the algorithm's name, how a resolved config becomes a member's, the population, and a
    member's state as its trainer's checkpoint holds it."""

    algorithm: ClassVar[str]
    #: The population's signature keys: a new config that changes one is another member.
    signature: ClassVar[Mapping[str, Any]]

    # -- what a subclass gives -------------------------------------------------------------------
    def member_config(self, c: Mapping[str, Any]) -> dict[str, Any]:
        """A resolved config as a population member's (``seed`` None stays None)."""
        raise NotImplementedError

    def build_population(self, members: list[dict[str, Any]]) -> Any:
        """The population of ``members`` (one per slot of the pack)."""
        raise NotImplementedError

    def member_state(self, population: Any, slot: int, seed: int) -> dict[str, Any]:
        """Slot ``slot``'s state as the trainer's checkpoint (``trainer_state.pt``) holds it."""
        raise NotImplementedError

    def load_member_state(self, population: Any, slot: int, state: Mapping[str, Any]) -> None:
        """Slot ``slot`` takes a trainer's checkpoint state (a member's or an unpacked trial's)."""
        raise NotImplementedError

    # -- a trial -----------------------------------------------------------------------------------
    def setup(self, config: dict[str, Any]) -> None:
        resolved = self._resolved(config)
        self._threads = max(1, int(resolved.get("num_cpus_for_learner", 1)))
        self._member = self.member_config(resolved)
        # the env as the driver resolved it: a registered name's creator travels with the trial
        self._env = self.get_trial_info().prepared.env  # type: ignore[union-attr]
        if self._member["seed"] is None:
            self._member["seed"] = int(np.random.default_rng().integers(2**31))
        self._pack = packs.current_pack()
        self._slot = packs.current_slot()
        self._population = self._pack.population(self._build)
        self._pack.join(self._slot, self._member)

    def _resolved(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` as the driver resolved it for this trial (a member runs only in a sweep)."""
        info = self.get_trial_info()
        prepared = getattr(info, "prepared", None)
        if not isinstance(prepared, ResolvedTrial) or not same_config(prepared.given, config):
            raise RuntimeError(f"packed {self.algorithm}: a member's config is resolved by the sweep's driver; run "
                               f"{self.algorithm} itself outside a sweep")
        return dict(prepared.config)

    def _build(self) -> Any:
        # One thread per whole CPU of the pack's learner bundle, for torch and numpy's BLAS alike
        # (as a trainer's learner: algorithms/core/trainer.py): more threads than CPUs spin against
        # each other, and a loaded machine makes every step several times slower.
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(self._threads)
        threadpool_limits(limits=self._threads, user_api="blas")
        # Every slot starts as this member's shape; a slot learns only once a member joins it.
        return self.build_population([{**self._member, "env": self._env, "seed": self._member["seed"] + m}
                                      for m in range(self._pack.capacity)])

    def step(self) -> dict[str, Any]:
        result = self._pack.step(self._slot)
        if "error" in result:
            raise FloatingPointError(f"packed {self.algorithm}: {result['error']}")
        result.update(learner="packed", pack_size=len(self._pack.members), pack_id=f"{socket.gethostname()}:{os.getpid()}",
                      num_workers=0, learner_device=str(self._population.device),
                      sampling_layout=f"in a pack of {self._pack.capacity}: {self._member['num_envs_per_worker']} envs")
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        import torch

        with self._pack.locked() as population:
            state = self.member_state(population, self._slot, int(self._member["seed"]))
        with atomic_file(os.path.join(checkpoint_dir, STATE_FILE)) as f:
            torch.save(state, f)
        write_agent_file(checkpoint_dir, self.algorithm, self.config)
        self._pack.remember(self._slot, os.path.abspath(checkpoint_dir), state)  # for a PBT exploit in this pack

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        import torch

        if not isinstance(checkpoint, str):
            raise ValueError(f"packed {self.algorithm}: expected a checkpoint directory, got {type(checkpoint).__name__}")
        state = self._pack.recall(os.path.abspath(checkpoint))
        if state is None:
            state = torch.load(os.path.join(checkpoint, STATE_FILE), map_location="cpu", weights_only=True)
        with self._pack.locked() as population:
            self.load_member_state(population, self._slot, state)
        self._member["seed"] = int(state["counters"].get("seed", self._member["seed"]))

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        member = self.member_config(self._resolved(new_config))  # the trial actor set the new config's info
        if any(shape_value(member[key]) != shape_value(self._member[key]) for key in self.signature):
            return False  # another shape: rebuilt (a new member in this slot)
        member["seed"] = self._member["seed"] if member["seed"] is None else member["seed"]
        with self._pack.locked() as population:
            population.configure(self._slot, member)
        self._member = member
        return True

    def cleanup(self) -> None:
        self._pack.leave(self._slot)
