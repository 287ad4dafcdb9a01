"""PPO for a population of members in one process: the learner of packed trials (issue 48).

P members, each a PPO agent on a flat Box observation and Discrete actions, train at once. Their
networks are one stacked population (:class:`PopulationNetworks`): the built-in separate policy and
value tanh MLPs in numpy, every layer of every member one batched matmul and the gradient by hand
(``population_mlp.py``), or a user's torch module of the model contract stacked with
``torch.func`` (``population_module.py``); member ``m``'s parameters are row ``m`` of one flat
buffer ``[P, D]`` that Adam steps whole. A pack whose members ask ``num_gpus_for_learner`` learns
on its GPU: the networks (the built-in MLPs as their torch twin, ``population_mlp_torch.py``), the
gradient and Adam live there; sampling's and the advantages' arrays stay in host memory.

Each member's ``num_envs_per_worker`` envs of a user's env are a vector env of its own, reset from
its seed (an env that raises fails its member alone); a natively vectorised gymnasium env
(CartPole) is one vector env of ``P x num_envs_per_worker`` copies, member ``m`` the ``m``-th
block. One batched forward pass acts for all. The
hyperparameters members may differ in (:data:`PER_MEMBER`: lr, gamma, lambda_, clip_param,
vf_loss_coeff, entropy_coeff, max_grad_norm, num_epochs, seed) are arrays of P values; what fixes
an array's shape (:data:`SIGNATURE`: env, network, envs, batch, minibatch) is the pack's own.

Members never mix: a member's loss reads its own rows only, its gradient is clipped by its own
norm, its Adam moments and step count are its own, so each learns as it would alone
(``tests/algorithms/ppo/test_population.py`` checks an update against ``torch.optim.Adam`` on each
member by itself). The loss is PPO's with a member axis in front and reset rows weighing nothing.

    pack = PopulationPPO([{"env": "CartPole-v1", "lr": lr, "seed": 0} for lr in (1e-3, 3e-3)])
    results = pack.train()          # one result per member, as a PPO trial reports it
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from algorithms.core.learner_config import learner_device
from algorithms.core.packed_member import shape_value
from algorithms.sampling.population_envs import PopulationEnvs
from algorithms.optim.population_adam import PopulationAdam
from algorithms.ppo.population_mlp import F32, PackedNetworks, keep_freed_memory, log_softmax

#: Keys every member of a pack shares (they fix the arrays' shapes), with PPO's defaults.
SIGNATURE: dict[str, Any] = {"env": None, "env_config": {}, "num_envs_per_worker": 8, "train_batch_size": 2048,
                             "minibatch_size": 512, "hidden_sizes": [64, 64], "model": None, "model_config": {},
                             "num_gpus_for_learner": 0}
#: Keys each member has its own value of, with PPO's defaults.
PER_MEMBER: dict[str, Any] = {"lr": 2.5e-3, "gamma": 0.99, "lambda_": 0.95, "clip_param": 0.2, "vf_loss_coeff": 0.5,
                              "entropy_coeff": 0.0, "max_grad_norm": 0.5, "num_epochs": 10, "seed": 0}



class PopulationNetworks(Protocol):
    """Every member's network, its parameters row ``m`` of :attr:`params` ``[P, D]`` (float32):
    ``population_mlp.PackedNetworks`` (the built-in MLP, numpy), or
    ``population_module.StackedModules`` (a user's torch module, or on a GPU the built-in MLP's
    twin of ``population_mlp_torch.py``, stacked on the pack's device)."""

    @property
    def params(self) -> Any:
        """The members' parameters ``[P, D]`` (a numpy array, or a tensor on the device), written
        in place by the population's Adam."""

    def gradient_buffer(self) -> Any:
        """A zero buffer like :attr:`params`, for :meth:`loss_gradient` to write into."""

    def row(self, m: int) -> np.ndarray:
        """Member ``m``'s parameters ``[D]`` (a numpy copy)."""

    def set_row(self, m: int, values: np.ndarray) -> None:
        """Member ``m``'s parameters become ``values``."""

    def finite(self, m: int) -> bool:
        """Whether member ``m``'s parameters are all finite."""

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits ``[P, B, A]`` and values ``[P, B]`` for observations ``[P, B, obs_dim]``."""

    def loss_gradient(self, mb: Mapping[str, np.ndarray], adv: np.ndarray, weight: np.ndarray,
                      coeffs: Mapping[str, np.ndarray], grad: Any) -> dict[str, np.ndarray]:
        """Each member's PPO loss on its minibatch, its gradient written into ``grad`` (of
        :meth:`gradient_buffer`)."""

    def initialise(self, m: int, seed: int) -> None:
        """Member ``m``'s network drawn anew from ``seed``."""

    def rows(self, members: Sequence[int]) -> PopulationNetworks:
        """The networks of ``members`` (copies), as a population of their own."""

    def put_rows(self, members: Sequence[int], sub: Any) -> None:
        """``sub`` (of :meth:`rows` of ``members``) back into this population."""

    def named_slices(self) -> list[tuple[str, int, tuple[int, ...]]]:
        """(name, offset, shape) of each parameter in a row, in a PPO checkpoint's order."""

    def buffers(self, m: int) -> dict[str, Any]:
        """Member ``m``'s tensors that are not learnt, by state_dict name."""

    def load_buffers(self, m: int, state: Mapping[str, Any]) -> None:
        """Member ``m``'s tensors that are not learnt, from a checkpoint's policy."""


def check_pack(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The members' configs with the defaults filled in; a ValueError naming ``pack_trials`` when
    they cannot be one pack (no member, an unknown key, a signature key that differs)."""
    if not configs:
        raise ValueError("pack_trials: a pack needs at least one member")
    allowed = set(SIGNATURE) | set(PER_MEMBER) | {"lambda"}
    members = []
    for config in configs:
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ValueError(f"pack_trials: a packed PPO member takes the keys {sorted(allowed)}; got {unknown}")
        c = {**SIGNATURE, **PER_MEMBER, **config}
        if "lambda" in config:
            c["lambda_"] = c.pop("lambda")
        members.append(c)
    for key in SIGNATURE:
        values = {shape_value(m[key]) for m in members}
        if len(values) > 1:
            raise ValueError(f"pack_trials: members of a pack share {key!r} (it fixes the arrays' shapes); "
                             f"got {sorted(values)}")
    first = members[0]
    if first["env"] is None:
        raise ValueError("pack_trials: config key 'env' is required")
    if first["train_batch_size"] % first["num_envs_per_worker"]:
        raise ValueError(f"pack_trials: train_batch_size ({first['train_batch_size']}) must be a multiple of "
                         f"num_envs_per_worker ({first['num_envs_per_worker']})")
    return members


class PopulationPPO:
    """PPO trained for every member of a pack at once (see the module docstring)."""

    def __init__(self, configs: Sequence[Mapping[str, Any]]) -> None:
        self.members = check_pack(configs)
        keep_freed_memory()
        first = self.members[0]
        self.P, self.N = len(self.members), int(first["num_envs_per_worker"])
        self.T = int(first["train_batch_size"]) // self.N
        self.envs = PopulationEnvs(self.members, self.N, "PPO")
        obs_space, act_space = self.envs.observation_space, self.envs.action_space
        self.obs_dim, self.num_actions = self.envs.obs_dim, self.envs.num_actions
        seeds = [int(m["seed"]) for m in self.members]
        self.device = learner_device(first["num_gpus_for_learner"])
        self.nets: PopulationNetworks
        sizes = [self.obs_dim, *first["hidden_sizes"], self.num_actions]
        if first["model"] is None and self.device == "cpu":
            self.nets = PackedNetworks(sizes, seeds)
        elif first["model"] is None:
            from algorithms.ppo.population_mlp_torch import builtin_stack

            self.nets = builtin_stack(sizes, seeds, obs_space, act_space, self.device)
        else:
            from algorithms.ppo.population_module import StackedModules

            self.nets = StackedModules(first["model"], first["model_config"], obs_space, act_space, seeds, self.device)
        self.grad = self.nets.gradient_buffer()
        self.adam = PopulationAdam(self.P, self.grad.shape[1], self.device)
        self.rng = np.random.default_rng([seeds[0], self.P])
        self.iteration = 0

    # a member's counts are its envs' (algorithms/sampling/population_envs.py)
    @property
    def env_steps(self) -> np.ndarray:
        return self.envs.env_steps

    @property
    def episodes(self) -> list[deque[tuple[float, int]]]:
        return self.envs.episodes

    @property
    def episodes_total(self) -> np.ndarray:
        return self.envs.episodes_total

    def hyper(self, key: str) -> np.ndarray:
        """The members' values of a :data:`PER_MEMBER` key, as a ``[P, 1]`` float32 column."""
        return np.array([[float(m[key])] for m in self.members], dtype=F32)

    # -- sampling -----------------------------------------------------------------------------------
    def sample(self) -> dict[str, np.ndarray]:
        """``T`` steps of every env: arrays ``[T, P, N]`` (values ``[T + 1, P, N]``, observations
        ``[T, P, N, obs_dim]``). Only the learning members (``envs.learning``) act: the others'
        rows hold action 0 for their envs (which wait, or step uncounted in a pack-wide vector
        env) and zeros where the learner would read them."""
        P, N, T = self.P, self.N, self.T
        out: dict[str, np.ndarray] = {"obs": np.empty((T, P, N, self.obs_dim), dtype=F32), "values": np.zeros((T + 1, P, N), dtype=F32),
               **{k: np.zeros((T, P, N), dtype=F32) for k in ("logp", "rewards", "terminated", "done", "valid")},
               "actions": np.zeros((T, P, N), dtype=np.int64)}
        members = np.flatnonzero(self.envs.learning)
        everyone = len(members) == P
        acting = self.nets if everyone else self.nets.rows(members.tolist())  # a stopped member's forward costs nothing
        for t in range(T):
            out["obs"][t] = self.envs.obs
            logits, values = acting.outputs(self.envs.obs if everyone else self.envs.obs[members])
            log_probs = log_softmax(logits)
            actions = (log_probs - np.log(-np.log(self.rng.random(log_probs.shape, dtype=F32)))).argmax(-1)
            out["actions"][t, members] = actions
            out["logp"][t, members] = np.take_along_axis(log_probs, actions[..., None], -1)[..., 0]
            out["values"][t, members] = values
            step = self.envs.step(out["actions"][t])
            for key in ("rewards", "terminated", "done", "valid"):
                out[key][t] = step[key]
        out["values"][T, members] = acting.outputs(self.envs.obs if everyone else self.envs.obs[members])[1]
        return out

    # -- learning -----------------------------------------------------------------------------------
    def advantages(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """GAE ``[T, P, N]`` with each member's gamma and lambda_; 0 on the rows where an env resets."""
        gamma, lam = self.hyper("gamma"), self.hyper("lambda_")
        values, adv = batch["values"], np.zeros((self.T, self.P, self.N), dtype=F32)
        last = np.zeros((self.P, self.N), dtype=F32)
        for t in reversed(range(self.T)):
            # a truncated episode's last step bootstraps from V of its final observation (row t + 1)
            delta = batch["rewards"][t] + gamma * values[t + 1] * (1 - batch["terminated"][t]) - values[t]
            last = (delta + gamma * lam * (1 - batch["done"][t]) * last) * batch["valid"][t]
            adv[t] = last
        return adv

    def learn(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each member's ``num_epochs`` passes of minibatch updates over its own batch; per-member
        means of the losses and its last epoch's KL and clip fraction. Members with more epochs
        than others run their later ones as a pack of their own (a member that is done costs
        nothing there)."""
        P, B = self.P, self.T * self.N
        adv = self.advantages(batch)

        def rows(a: np.ndarray) -> np.ndarray:  # [T, P, N, ...] -> [P, T * N, ...]
            return np.ascontiguousarray(np.moveaxis(a, 1, 0).reshape(P, B, *a.shape[3:]))

        table = {"obs": rows(batch["obs"]), "actions": rows(batch["actions"]), "logp": rows(batch["logp"]),
                 "valid": rows(batch["valid"]), "adv": rows(adv)}
        table["returns"] = table["adv"] + rows(batch["values"][:-1])
        epochs = np.array([int(m["num_epochs"]) for m in self.members])
        totals = {k: np.zeros(P) for k in ("policy_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction")}
        done = 0
        for until in sorted(set(epochs.tolist())):  # epochs done .. until - 1: the members with as many
            members = np.flatnonzero(epochs >= until).tolist()
            if len(members) == P:
                part = self._epochs(table, until - done)
            else:
                sub = self._subset(members)
                part = sub._epochs({k: v[members] for k, v in table.items()}, until - done)
                self._put_subset(members, sub)
            for key in ("policy_loss", "vf_loss", "entropy"):
                totals[key][members] += part[key]
            for key in ("approx_kl", "clip_fraction"):  # the last epoch's
                totals[key][members] = part[key]
            done = until
        count = self._minibatches()
        updates = epochs * count
        return {**{k: totals[k] / updates for k in ("policy_loss", "vf_loss", "entropy")},
                "approx_kl": totals["approx_kl"] / count, "clip_fraction": totals["clip_fraction"] / count}

    def _minibatches(self) -> int:
        B = self.T * self.N
        return max(1, round(B / min(int(self.members[0]["minibatch_size"]), B)))

    def _epochs(self, table: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
        """``n`` epochs of every member's minibatch updates over its rows of ``table`` ``[P, B, ...]``:
        per member, the sums of its losses, and its last epoch's sums of KL and clip fraction."""
        P, B = self.P, self.T * self.N
        count = self._minibatches()
        sums = {k: np.zeros(P) for k in ("policy_loss", "vf_loss", "entropy")}
        kl, clipped = np.zeros(P), np.zeros(P)
        for _ in range(n):
            order = np.argsort(self.rng.random((P, B)), axis=1)
            kl, clipped = np.zeros(P), np.zeros(P)
            for k in range(count):
                idx = order[:, k * B // count:(k + 1) * B // count]
                mb = {key: np.take_along_axis(value, idx if value.ndim == 2 else idx[..., None], 1)
                      for key, value in table.items()}
                stats = self.update(mb)
                for key in sums:
                    sums[key] += stats[key]
                kl += stats["approx_kl"]
                clipped += stats["clip_fraction"]
        return {**sums, "approx_kl": kl, "clip_fraction": clipped}

    def update(self, mb: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One Adam step of every member on its minibatch (``[P, M, ...]`` rows of obs, actions, logp, adv, returns, valid; reset rows
        weigh 0): the loss's gradient by hand into :attr:`grad`, then :meth:`adam_step`.
        Per-member losses, KL and clip fraction."""
        valid = mb["valid"]
        weight = valid / np.maximum(valid.sum(axis=1, keepdims=True), 1.0)  # [P, M]: 1/n on real rows
        adv = mb["adv"]
        mean = (adv * weight).sum(axis=1, keepdims=True)
        std = np.sqrt((np.square(adv - mean) * weight).sum(axis=1, keepdims=True))
        adv = (adv - mean) / (std + 1e-8)
        clip = self.hyper("clip_param")
        coeffs = {"clip_param": clip, **{k: self.hyper(k) for k in ("vf_loss_coeff", "entropy_coeff")}}
        out = self.nets.loss_gradient(mb, adv, weight, coeffs, self.grad)
        ratio, log_ratio = out.pop("ratio"), out.pop("log_ratio")
        self.adam_step()
        approx_kl = (((ratio - 1) - log_ratio) * weight).sum(axis=1)
        clip_fraction = ((np.abs(ratio - 1) > clip) * weight).sum(axis=1)
        return {**out, "approx_kl": approx_kl, "clip_fraction": clip_fraction}

    def adam_step(self) -> None:
        """Adam on every member's row of the flat buffer with its own lr, after clipping its
        gradient to its own global norm (``algorithms/optim/population_adam.py``)."""
        self.adam.step(self.nets.params, self.grad, self.hyper("lr"), self.hyper("max_grad_norm"))

    # -- one iteration --------------------------------------------------------------------------------
    def train(self, learning: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """One batch and its update for every member, or for the members ``learning`` only (the
        others' envs step on, but nothing of it is theirs: their state stays as it was): a result
        per learning member, PPO's keys, in order. A member whose loss or parameters are no longer
        finite has ``"error"`` in its result."""
        chosen = list(range(self.P)) if learning is None else sorted(int(m) for m in learning)
        self.envs.learning = np.zeros(self.P, dtype=bool)
        self.envs.learning[chosen] = True
        batch = self.sample()
        with np.errstate(all="ignore"):  # a member that diverges is told below, by name
            stats = self.learn(batch) if len(chosen) == self.P else self._learn_subset(batch, chosen)
        self.iteration += 1
        results = []
        for i, m in enumerate(chosen):
            result: dict[str, Any] = {
                **self.envs.episode_stats(m), "cur_lr": float(self.members[m]["lr"]), "members_learning": len(chosen),
                **{k: float(v[i]) for k, v in stats.items()}}
            if m in self.envs.errors:
                result["error"] = f"member {m}'s env raised:\n{self.envs.errors.pop(m)}"
            elif not (all(math.isfinite(float(v[i])) for v in stats.values()) and self.nets.finite(m)):
                result["error"] = (f"member {m}'s loss or parameters are not finite (lr {self.members[m]['lr']!r}): "
                                   f"{ {k: float(v[i]) for k, v in stats.items()} }")
            results.append(result)
        return results

    def _learn_subset(self, batch: Mapping[str, np.ndarray], members: list[int]) -> dict[str, np.ndarray]:
        """:meth:`learn` for ``members`` only: their rows of every array, learned on as a pack of
        their own, then written back."""
        sub = self._subset(members)
        stats = sub.learn({k: v[:, members] for k, v in batch.items()})
        self._put_subset(members, sub)
        return stats

    def _subset(self, members: list[int]) -> PopulationPPO:
        """A pack of ``members`` alone: copies of their networks and optimiser state (see
        :meth:`_put_subset`), their configs, this pack's envs' shape and random state."""
        sub = object.__new__(PopulationPPO)
        sub.members = [self.members[m] for m in members]
        sub.P, sub.N, sub.T, sub.num_actions, sub.rng = len(members), self.N, self.T, self.num_actions, self.rng
        sub.nets = self.nets.rows(members)
        sub.device = self.device
        sub.grad = sub.nets.gradient_buffer()
        sub.adam = self.adam.rows(members)
        return sub

    def _put_subset(self, members: list[int], sub: PopulationPPO) -> None:
        """``sub``'s (of :meth:`_subset` of ``members``) networks and optimiser state written back."""
        self.nets.put_rows(members, sub.nets)
        self.adam.put_rows(members, sub.adam)

    def join(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` starts anew as a trial of ``config`` (its signature the pack's): fresh
        layers from its seed, no optimiser state, no env steps or episodes of its own yet."""
        self.members[m] = check_pack([{**config, **{k: self.members[m][k] for k in SIGNATURE}}])[0]
        self.nets.initialise(m, int(self.members[m]["seed"]))
        self.adam.reset(m)
        self.envs.join(m)

    # -- one member: its checkpoint, an exploit inside the pack -------------------------------------------
    def member_state(self, m: int) -> dict[str, Any]:
        """Member ``m``'s slice of the pack: its parameters, Adam moments and step count, its
        config, env steps and episode window (copies: the pack goes on without touching them)."""
        return {"params": self.nets.row(m), **self.adam.member_state(m),
                "config": dict(self.members[m]), **self.envs.counts(m)}

    def load_member_state(self, m: int, state: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> None:
        """Member ``m`` takes ``state`` (:meth:`member_state` of this pack's member or another's of
        the same signature); ``config`` (a PBT exploit's perturbed one) replaces the state's
        per-member hyperparameters, as a trial's restore with a new config does."""
        if state["params"].shape != (self.grad.shape[1],):
            raise ValueError(f"pack_trials: a member state of {state['params'].shape[0]} parameters does not fit "
                             f"this pack's members ({self.grad.shape[1]})")
        merged = check_pack([{**{k: v for k, v in state["config"].items() if k in PER_MEMBER},
                              **{k: self.members[m][k] for k in SIGNATURE}, **(config or {})}])[0]
        self.nets.set_row(m, state["params"])
        self.adam.load_member_state(m, state)
        self.members[m] = merged
        self.restart_counts(m, state["env_steps"], state["episodes_total"], state["episodes"])

    def configure(self, m: int, config: Mapping[str, Any]) -> None:
        """Member ``m`` learns on with ``config``'s per-member hyperparameters (its signature the pack's)."""
        self.members[m] = check_pack([{**{k: v for k, v in config.items() if k in PER_MEMBER},
                                       **{k: self.members[m][k] for k in SIGNATURE}}])[0]

    def restart_counts(self, m: int, env_steps: int, episodes_total: int, episodes: Sequence[tuple[float, int]]) -> None:
        """Member ``m``'s env steps, episode count and window are these (a restore's or an exploit's;
        its envs go on with the episodes they are in, as a trial's own do)."""
        self.envs.restart_counts(m, env_steps, episodes_total, episodes)

    def exploit(self, target: int, donor: int, config: Mapping[str, Any]) -> None:
        """PBT inside the pack: member ``target`` takes ``donor``'s network and optimiser state (a
        slice copied, no checkpoint written) and learns on with ``config``'s hyperparameters; its
        own env steps and episodes stay its own, as a trial's curve does after an exploit."""
        state = {**self.member_state(donor), **self.envs.counts(target)}
        self.load_member_state(target, state, config)

    def stop(self) -> None:
        self.envs.stop()
