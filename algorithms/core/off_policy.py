"""What the off-policy trainers (DQN, SAC, TD3) share: the keys of replay and of the update cadence, the
iteration (sample into the replay buffer, learn from it) and the learner's state.

An iteration repeats rounds until it has sampled ``min_sample_timesteps_per_iteration`` env
steps: a round samples ``train_freq`` env steps (transitions: reset slots do not count) from the
rollout workers (all of them and their envs together; streamed or on request, as the config
says) into the replay buffer
(``algorithms/data/replay_buffer.py``), then, once the buffer holds
``num_steps_sampled_before_learning_starts`` transitions, makes ``gradient_steps`` updates on
minibatches of ``train_batch_size`` replayed transitions, then publishes the weights. SB3's
``train_freq``/``gradient_steps`` are that cadence; RLlib's ``training_intensity`` is
``gradient_steps * train_batch_size / train_freq``. From streaming actors (``sample_async=True``:
Ape-X's) a round takes whatever they sampled while the learner learnt, at least ``train_freq``
env steps, and makes ``gradient_steps`` updates per ``train_freq`` of them (a fraction carried to
the next round): the replay ratio is the config's however fast the actors run, and the learner,
not the actors, sets the pace.

A subclass provides ``build_policy`` (its networks), ``build_optimizers``, ``update(batch)`` (one
gradient step, returning its statistics as detached tensors), ``after_round`` (target networks,
exploration), ``action_spec`` (the replay buffer's action columns) and ``apply_lr``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.sampling.fragment import Fragment
from algorithms.core.learner_config import is_builtin, set_lr, to_cpu
from algorithms.data.observations import tree_map
from algorithms.data.replay_buffer import NStepTransitions, ReplayBuffer
from algorithms.core.common_config import check
from algorithms.core.trainer import DistributedTrainer
from schedulers.validation import is_int, is_number

#: Keys shared by the off-policy trainers, with the defaults they share.
OFF_POLICY_DEFAULTS: dict[str, Any] = {
    "num_envs_per_worker": 1,
    "lr": 3e-4,
    "gamma": 0.99,
    "train_batch_size": 32,  # transitions replayed per update
    "train_freq": 4,  # env steps sampled (all workers and envs together) between two rounds of updates
    "gradient_steps": 1,  # updates per round
    "min_sample_timesteps_per_iteration": 1000,  # an iteration samples at least this many env steps
    "num_steps_sampled_before_learning_starts": 1000,
    "replay_buffer_config": {"capacity": 50_000},
    "store_buffer_in_checkpoints": False,  # True: checkpoints hold the buffer's content
    "n_step": 1,
    "max_grad_norm": None,  # None: no clipping; else the gradient's global norm is clipped to it
}


#: How many rounds of ``train_freq`` env steps streaming actors may sample ahead of the learner.
STREAM_ROUNDS_AHEAD = 8


def schedule_points(schedule: Any, key: str) -> tuple[list[float], list[float]]:
    """(env steps, values) of a ``[[env_steps, value], ...]`` schedule; ValueError naming ``key``."""
    ok = isinstance(schedule, (list, tuple)) and len(schedule) >= 1 and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and is_number(p[0]) and is_number(p[1]) for p in schedule)
    check(ok, key, "must be a list of [env_steps, value] pairs", schedule)
    steps = [float(p[0]) for p in schedule]
    check(all(a <= b for a, b in zip(steps, steps[1:])), key, "steps must be increasing", schedule)
    return steps, [float(p[1]) for p in schedule]


class OffPolicyTrainer(DistributedTrainer):
    """A trainer that learns from a replay buffer its rollout workers fill (see the module docstring)."""

    _aliases = {"learning_starts": "num_steps_sampled_before_learning_starts"}
    _rebuild_keys = DistributedTrainer._rebuild_keys + ("hidden_sizes", "activation", "replay_buffer_config", "n_step",
                                                        "gamma")
    _model_shorthands = ("hidden_sizes", "activation")
    learner_name = "torch"
    # Every streamed step goes into the replay buffer (whole takes); the streams' bound is a few
    # rounds (stream_bound), not an on-policy batch.
    bounded_streams = False
    #: Whether ``config["model"]`` may be a callable building the network (see the subclass).
    _takes_model_callable = False

    # -- config ------------------------------------------------------------------------------
    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        check(is_number(c["lr"]) and c["lr"] > 0, "lr", "must be a number > 0", c["lr"])
        check(is_number(c["gamma"]) and 0 < c["gamma"] <= 1, "gamma", "must be in (0, 1]", c["gamma"])
        for key in ("train_freq", "gradient_steps", "min_sample_timesteps_per_iteration", "n_step"):
            check(is_int(c[key]) and c[key] >= 1, key, "must be an int >= 1", c[key])
        starts = c["num_steps_sampled_before_learning_starts"]
        check(is_int(starts) and starts >= 0, "num_steps_sampled_before_learning_starts", "must be an int >= 0", starts)
        replay = c["replay_buffer_config"]
        check(isinstance(replay, dict) and set(replay) == {"capacity"} and is_int(replay["capacity"])
              and replay["capacity"] >= 1, "replay_buffer_config", "must be {'capacity': int >= 1}", replay)
        check(isinstance(c["store_buffer_in_checkpoints"], bool), "store_buffer_in_checkpoints",
              "must be True or False", c["store_buffer_in_checkpoints"])
        check(c["max_grad_norm"] is None or (is_number(c["max_grad_norm"]) and c["max_grad_norm"] > 0),
              "max_grad_norm", "must be None (off) or a number > 0", c["max_grad_norm"])
        check(is_builtin(c["model"]) or cls._takes_model_callable, "model", f"{cls._name} builds its networks "
              "from the built-in options (hidden_sizes, activation)", c["model"])
        if is_builtin(c["model"]):
            check(not c["model"]["shared_layers"], "model.shared_layers", f"{cls._name}'s networks share no layers",
                  c["model"]["shared_layers"])

    # -- to implement ------------------------------------------------------------------------
    def action_spec(self) -> tuple[tuple[int, ...], Any]:
        """(shape, dtype) of one action in the replay buffer."""
        raise NotImplementedError

    def build_optimizers(self) -> dict[str, Any]:
        """The learner's optimisers by name (saved and restored by name)."""
        raise NotImplementedError

    def update(self, batch: dict[str, Any]) -> dict[str, Any]:
        """One gradient step on a replayed minibatch (torch tensors on the learner's device);
        returns its statistics (detached tensors or floats), averaged over the iteration."""
        raise NotImplementedError

    def after_round(self) -> None:
        """After a round's updates, before its weights are published (target networks, exploration)."""

    def make_replay_buffer(self, capacity: int, action_shape: tuple[int, ...], action_dtype: Any) -> ReplayBuffer:
        """The replay buffer: uniform unless the subclass says otherwise."""
        return ReplayBuffer(capacity, self.observation_space, action_shape, action_dtype)

    def step_optimizer(self, name: str, loss: Any, module: Any) -> None:
        """Back-propagate ``loss``, clip ``module``'s gradient to ``max_grad_norm`` (when set) and
        step the optimiser called ``name``."""
        import torch

        self.optimizers[name].zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg["max_grad_norm"] is not None:
            torch.nn.utils.clip_grad_norm_(module.parameters(), self.cfg["max_grad_norm"])
        self.optimizer_steps[name]()

    def apply_lr(self) -> None:
        """Set every optimiser's learning rate from the config (after a restore or a new config)."""
        for optimizer in self.optimizers.values():
            set_lr(optimizer, float(self.cfg["lr"]))

    # -- building ------------------------------------------------------------------------------
    def build_learner(self) -> None:
        import torch

        c = self.cfg
        self.optimizers = self.build_optimizers()
        from algorithms.optim.optimizer_step import lean_step

        # ``optimizer.step()`` without torch's per-call profiler range (algorithms/optim/optimizer_step.py)
        self.optimizer_steps = {name: lean_step(optimizer) for name, optimizer in self.optimizers.items()}
        shape, dtype = self.action_spec()
        self.buffer = self.make_replay_buffer(c["replay_buffer_config"]["capacity"], shape, dtype)
        self._assemble: NStepTransitions | None = None
        self.replay_rng = np.random.default_rng([self.seed, 2])
        self.torch_rng = torch.Generator(device=self.device).manual_seed(self.seed)
        self.num_updates = 0
        self._update_credit = 0.0  # updates owed to streamed steps, fractions of one (see training_step)

    def stream_bound(self) -> int:
        """Streams sample at most a few rounds ahead of the learner: ``STREAM_ROUNDS_AHEAD``
        rounds of ``train_freq`` env steps (the bound a group takes at its start). The learner
        keeps the config's replay ratio, so actors that could sample faster than it learns would
        only pile up steps sampled with ever older weights."""
        return STREAM_ROUNDS_AHEAD * int(self.cfg["train_freq"])

    # -- an iteration --------------------------------------------------------------------------
    def training_step(self) -> dict[str, Any]:
        c = self.cfg
        stats: list[dict[str, Any]] = []
        while self._this_iter["env_steps"] < c["min_sample_timesteps_per_iteration"]:
            got = self._sample_round(c["train_freq"])
            if len(self.buffer) >= max(1, c["num_steps_sampled_before_learning_starts"]):
                updates = c["gradient_steps"]
                if self._streams():  # as many as the steps taken ask for (see the module docstring)
                    self._update_credit += c["gradient_steps"] * got / c["train_freq"]
                    updates = int(self._update_credit)
                    self._update_credit -= updates
                for _ in range(updates):
                    stats.append(self.update(self._replayed()))
                    self.num_updates += 1
            self.after_round()
            self.publish_weights()
        return {**_means(stats), "cur_lr": float(c["lr"]), "num_updates": self.num_updates,
                "replay_size": len(self.buffer), "num_sgd_updates": len(stats)}

    def _sample_round(self, env_steps: int) -> int:
        """Sample ``env_steps`` transitions (or more, from streams) into the buffer; returns how
        many. NEXT_STEP reset slots are no transitions, so a round asks again for what they took
        (SB3 counts env steps alike)."""
        got = 0
        while got < env_steps:
            for fragment in self.sample(env_steps - got):
                steps = fragment.env_steps
                self.buffer.add(self._transitions(fragment))
                self.count_batch(steps, fragment.episode_returns, fragment.episode_lens)
                got += steps
        return got

    def _transitions(self, fragment: Fragment) -> dict[str, Any]:
        """The fragment's n-step transitions, windows continued across each worker's fragments."""
        gamma, n_step = float(self.cfg["gamma"]), int(self.cfg["n_step"])
        if self._assemble is None or (self._assemble.gamma, self._assemble.n_step) != (gamma, n_step):
            self._assemble = NStepTransitions(gamma, n_step)  # a new config: the held rows start anew
        return self._assemble(fragment)

    def _replayed(self) -> dict[str, Any]:
        import torch

        batch = self.buffer.sample(self.cfg["train_batch_size"], self.replay_rng)
        # observations in the env's dtype: each network makes them float on this device
        return {key: tree_map(lambda value: torch.from_numpy(value).to(self.device), value)
                for key, value in batch.items()}

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        import torch

        state: dict[str, Any] = {
            "optimizers": {name: to_cpu(opt.state_dict()["state"]) for name, opt in self.optimizers.items()},
            "torch_rng": self.torch_rng.get_state().cpu(),
            "replay_rng": self.replay_rng.bit_generator.state,
            "num_updates": self.num_updates,
            "buffer": None,
        }
        if self.cfg["store_buffer_in_checkpoints"]:
            state["buffer"] = {key: tree_map(lambda leaf: torch.from_numpy(np.ascontiguousarray(leaf))
                                             if isinstance(leaf, np.ndarray) else leaf, value)
                               for key, value in self.buffer.state().items()}
        return state

    def load_learner_state(self, state: dict[str, Any]) -> None:
        """Optimisers (their moments: the hyperparameters, the learning rate first, are this
        trial's config's, as PBT's exploit needs), generators and, when it was saved, the replay
        buffer; without it the trainer samples ``num_steps_sampled_before_learning_starts`` env
        steps again before it learns."""
        for name, optimizer in self.optimizers.items():
            saved = state["optimizers"].get(name)
            if saved is not None:
                optimizer.load_state_dict({**optimizer.state_dict(), "state": saved})
        self.torch_rng.set_state(state["torch_rng"])
        self.replay_rng.bit_generator.state = state["replay_rng"]
        self.num_updates = int(state["num_updates"])
        saved_buffer = state.get("buffer")
        if saved_buffer is None:
            self.buffer.clear()
        else:
            self.buffer.load_state({key: tree_map(lambda leaf: leaf.numpy() if hasattr(leaf, "numpy") else leaf, value)
                                    for key, value in saved_buffer.items()})
        self.apply_lr()

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.apply_lr()


def _means(stats: list[dict[str, Any]]) -> dict[str, float]:
    """Per-key means of the updates' statistics (one transfer per key for tensors); NaN before
    the first update."""
    if not stats:
        return {}
    import torch

    out = {}
    for key in stats[0]:
        values = [s[key] for s in stats]
        if isinstance(values[0], torch.Tensor):
            out[key] = float(torch.stack(values).float().mean())
        else:
            out[key] = float(np.mean(values))
    return out
