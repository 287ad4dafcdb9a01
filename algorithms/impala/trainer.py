"""IMPALA (Espeholt et al. 2018), as a trial that owns its rollout actors.

Read top to bottom: config and defaults, then the trainer. The rollout actors never wait for
the learner: they stream (``WorkerGroup.stream``: each samples without pause and loads new weights
between two env steps), into a bounded queue (at most two train batches sampled and not yet
learnt from). The learner takes ``train_batch_size`` env steps as they come, whatever weights
sampled them, judges them with its current policy and corrects for the difference with V-trace
(``algorithms/data/vtrace.py``), makes one gradient step (policy gradient on V-trace's advantages,
value loss to its targets, entropy bonus) and publishes its weights; an iteration runs such
updates until ``min_sample_timesteps_per_iteration`` env steps came in. APPO
(``algorithms/appo/trainer.py``) is this trainer with PPO's clipped surrogate for the policy loss.

    from algorithms import IMPALA
    trainer = IMPALA(config={"env": "CartPole-v1", "num_workers": 2})
    result = trainer.train()

The policy is the trainers' base one (``algorithms/models/torch_policy.py``): the built-in MLP or a
module of one's own, every action and observation space PPO takes. Keys and defaults are RLlib's.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from algorithms.core.common_config import check
from algorithms.core.learner_config import make_optimizer, set_lr, to_cpu
from algorithms.core.trainer import DistributedTrainer
from algorithms.data.observations import concat, flatten_lead, to_tensors
from algorithms.data.vtrace import vtrace
from algorithms.sampling.fragment import Fragment
from schedulers.validation import is_int, is_number

IMPALA_DEFAULTS: dict[str, Any] = {
    "num_workers": 2,  # IMPALA is its actors: two streaming ones unless told (0: sample in the learner, synchronously)
    "sample_async": True,
    "num_envs_per_worker": 8,
    "train_batch_size": 500,  # env steps per gradient step
    # an iteration (one result) runs gradient steps until this many env steps came in
    "min_sample_timesteps_per_iteration": 5000,
    "lr": 5e-4,
    "gamma": 0.99,
    "vf_loss_coeff": 0.5,
    "entropy_coeff": 0.01,
    "grad_clip": 40.0,  # the global norm of the gradient, clipped (None: off)
    # V-trace's truncation of the importance weights: in the value targets and in the policy gradient
    "vtrace_clip_rho_threshold": 1.0,
    "vtrace_clip_pg_rho_threshold": 1.0,
    # the built-in network (shorthands of model={"hidden_sizes": ..., "activation": ...})
    "hidden_sizes": [64, 64],
    "activation": "tanh",
}


class IMPALA(DistributedTrainer):
    """Importance-weighted actor-learner: streaming rollout actors, V-trace-corrected updates.

    A ``tune.Trainable``: ``tune.run("IMPALA", config={"env": ...})``. See ``IMPALA_DEFAULTS`` and
    ``algorithms.core.common_config.COMMON_DEFAULTS`` for the keys; ``max_grad_norm`` is accepted
    for ``grad_clip``.
    """

    _name = "IMPALA"
    _defaults = IMPALA_DEFAULTS
    _aliases = {"max_grad_norm": "grad_clip"}
    _rebuild_keys = DistributedTrainer._rebuild_keys + ("hidden_sizes", "activation")
    _model_shorthands = ("hidden_sizes", "activation")

    optimizer: Any
    _optimizer_step: Callable[[], None]

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        check(is_number(c["lr"]) and c["lr"] > 0, "lr", "must be a number > 0", c["lr"])
        check(is_number(c["gamma"]) and 0 < c["gamma"] <= 1, "gamma", "must be in (0, 1]", c["gamma"])
        for key in ("vf_loss_coeff", "entropy_coeff"):
            check(is_number(c[key]) and c[key] >= 0, key, "must be a number >= 0", c[key])
        for key in ("vtrace_clip_rho_threshold", "vtrace_clip_pg_rho_threshold"):
            check(is_number(c[key]) and c[key] > 0, key, "must be a number > 0", c[key])
        check(c["grad_clip"] is None or (is_number(c["grad_clip"]) and c["grad_clip"] > 0),
              "grad_clip", "must be None (off) or a number > 0", c["grad_clip"])
        steps = c["min_sample_timesteps_per_iteration"]
        check(is_int(steps) and steps >= 0, "min_sample_timesteps_per_iteration", "must be an int >= 0", steps)
        check(c["max_requests_in_flight_per_worker"] is None, "max_requests_in_flight_per_worker",
              f"must be None: {cls._name}'s rollout actors stream", c["max_requests_in_flight_per_worker"])

    # -- the learner ---------------------------------------------------------------------------
    def build_learner(self) -> None:
        from algorithms.optim.optimizer_step import lean_step

        c = self.cfg
        self.optimizer = make_optimizer(list(self.policy.parameters()), c["optimizer"], c["optimizer_config"], c["lr"])
        self._optimizer_step = lean_step(self.optimizer)
        self.num_learner_updates = 0

    def training_step(self) -> dict[str, Any]:
        """Gradient steps on batches as the actors stream them, until the iteration's env steps came in."""
        c = self.cfg
        updates: list[dict[str, float]] = []
        while not updates or self._this_iter["env_steps"] < c["min_sample_timesteps_per_iteration"]:
            fragments = self.sample(c["train_batch_size"])
            for fragment in fragments:
                self.count_batch(fragment.env_steps, fragment.episode_returns, fragment.episode_lens)
            updates.append(self.learn_on_fragments(fragments))
            self.publish_weights()
        metrics = {key: float(np.mean([u[key] for u in updates])) for key in updates[0]}
        return {**metrics, "cur_lr": float(c["lr"]), "num_learner_updates": self.num_learner_updates}

    def learn_on_fragments(self, fragments: list[Fragment]) -> dict[str, float]:
        """The gradient steps on these fragments (IMPALA: one; see the module docstring)."""
        rows = FragmentRows(fragments, self.policy, self.device)
        steps = [self.gradient_step(rows) for _ in range(self.passes_per_batch())]
        return {key: float(np.mean([s[key] for s in steps])) for key in steps[0]}

    def passes_per_batch(self) -> int:
        return 1

    def gradient_step(self, rows: FragmentRows) -> dict[str, float]:
        """One gradient step: V-trace's targets under the current values, then the losses."""
        import torch

        c = self.cfg
        logp, entropy, values = self.policy.evaluate(rows.obs, rows.actions)
        assert entropy is not None
        advantages, targets = self.vtrace_targets(rows, logp.detach(), values.detach())
        mask = rows.loss_mask
        policy_loss = self.policy_loss(rows, logp[mask], advantages[mask])
        vf_loss = 0.5 * (values[mask] - targets[mask]).pow(2).mean()
        loss = policy_loss + c["vf_loss_coeff"] * vf_loss - c["entropy_coeff"] * entropy[mask].mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c["grad_clip"] is not None:
            torch.nn.utils.clip_grad_norm_(list(self.policy.parameters()), c["grad_clip"])
        self._optimizer_step()
        self.num_learner_updates += 1
        self.after_gradient_step()
        rho = (logp.detach()[mask] - rows.behaviour_logp[mask]).exp()
        return {"policy_loss": float(policy_loss.detach()), "vf_loss": float(vf_loss.detach()),
                "entropy": float(entropy.detach()[mask].mean()), "mean_rho": float(rho.mean()),
                "stale_fraction": rows.stale_fraction(self.workers.weights_version)}

    def after_gradient_step(self) -> None:
        """What follows each gradient step (APPO: its target policy's copy, when due)."""

    def target_logp(self, rows: FragmentRows, logp: Any) -> Any:
        """The log-probabilities V-trace takes as the target policy's: the learner's own."""
        return logp

    def vtrace_targets(self, rows: FragmentRows, logp: Any, values: Any) -> tuple[Any, Any]:
        """(advantages, value targets), per row, of V-trace for each fragment (detached tensors)."""
        import torch

        c = self.cfg
        target = self.target_logp(rows, logp).cpu().numpy()
        values_np = values.cpu().numpy()
        advantages = np.zeros(len(values_np), np.float32)
        targets = values_np.copy()
        for fragment, (start, steps, stop) in zip(rows.fragments, rows.spans):
            T, N = fragment.valid.shape
            vs, adv = vtrace(
                behaviour_logp=fragment.logp, target_logp=target[start:steps].reshape(T, N),
                values=values_np[start:steps].reshape(T, N), last_values=values_np[steps:stop],
                rewards=fragment.rewards, terminated=fragment.terminated, truncated=fragment.truncated,
                valid=fragment.valid, gamma=float(c["gamma"]), rho_clip=float(c["vtrace_clip_rho_threshold"]),
                pg_rho_clip=float(c["vtrace_clip_pg_rho_threshold"]))
            advantages[start:steps], targets[start:steps] = adv.reshape(-1), vs.reshape(-1)
        return torch.from_numpy(advantages).to(self.device), torch.from_numpy(targets).to(self.device)

    def policy_loss(self, rows: FragmentRows, logp: Any, advantages: Any) -> Any:
        """IMPALA's: the policy gradient on V-trace's advantages."""
        return -(logp * advantages).mean()

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        set_lr(self.optimizer, float(new["lr"]))  # a PBT exploit's lr, in place; the rest is read every update

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        return {"optimizer": to_cpu(self.optimizer.state_dict()), "num_learner_updates": self.num_learner_updates}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        set_lr(self.optimizer, float(self.cfg["lr"]))  # this trial's lr (a PBT exploit loads a donor's state)
        self.num_learner_updates = int(state["num_learner_updates"])


class FragmentRows:
    """Fragments as the rows of one forward pass: each fragment's T x N steps, flat, then the
    N observations after its last step (their values bootstrap it; their policy rows are unused).
    ``spans`` holds each fragment's (first row, first bootstrap row, end)."""

    def __init__(self, fragments: list[Fragment], policy: Any, device: Any) -> None:
        import torch

        self.fragments = fragments
        obs, actions, mask, behaviour, self.spans = [], [], [], [], []
        start = 0
        for f in fragments:
            T, N = f.valid.shape
            obs += [flatten_lead(f.obs), f.last_obs]
            acts = f.actions.reshape(T * N, -1)
            actions += [acts, acts[-N:]]
            mask += [f.valid.reshape(-1), np.zeros(N, bool)]
            behaviour += [f.logp.reshape(-1), np.zeros(N, np.float32)]
            self.spans.append((start, start + T * N, start + T * N + N))
            start += T * N + N
        self.obs = to_tensors(concat(obs), device)
        self.actions = policy.actions_tensor(torch.from_numpy(np.concatenate(actions).astype(np.float32)).to(device))
        self.loss_mask = torch.from_numpy(np.concatenate(mask)).to(device)
        self.behaviour_logp = torch.from_numpy(np.concatenate(behaviour).astype(np.float32)).to(device)

    def stale_fraction(self, current: int | None) -> float:
        """The share of the batch's transitions sampled with weights older than ``current``."""
        stale = total = 0
        for f in self.fragments:
            n = f.env_steps
            total += n
            if f.weights_versions is not None and current is not None:
                stale += int((f.valid & (np.asarray(f.weights_versions) != current)[:, None]).sum())
            elif f.weights_version is not None and f.weights_version != current:
                stale += n
        return stale / max(total, 1)
