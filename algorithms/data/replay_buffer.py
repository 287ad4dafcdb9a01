"""Experience replay for off-policy trainers: fragments in, uniformly sampled transitions out.

Rollout workers return (time, env) fragments (``algorithms/sampling/rollout_worker.py``); :func:`transitions`
turns one into n-step transitions ``(obs, action, reward, next_obs, discount)``, where ``reward``
sums the n rewards discounted and ``discount`` is ``gamma ** k`` for the k steps taken, 0 when the
episode *terminated* in them (a *truncated* episode bootstraps from its final observation, which
in NEXT_STEP autoreset mode is the observation of the reset step that follows). A transition
never crosses an episode's end nor the fragment's end: near either it takes fewer steps.
:class:`NStepTransitions` lifts the second limit for a stream of fragments: it holds back each
worker's last ``n_step - 1`` steps until that worker's next fragment continues them, so that a
fragment shorter than ``n_step`` (SAC's ``train_freq=1`` samples one step per round) still
yields n-step transitions.

:class:`ReplayBuffer` is a ring buffer of those in preallocated numpy arrays (FIFO eviction, as
SB3's and RLlib's default buffers), sampled uniformly with the learner's generator.

    buffer = ReplayBuffer(capacity=50_000, observations=env.observation_space, action_shape=(), action_dtype=np.int64)
    buffer.add(transitions(fragment, gamma=0.99, n_step=1))
    batch = buffer.sample(32, np.random.default_rng(0))   # dict of arrays, 32 rows each
"""

from __future__ import annotations

from typing import Any

import numpy as np

import gymnasium as gym

from algorithms.sampling.fragment import TIME_MAJOR, Fragment
from algorithms.data.observations import ObsSpace, concat, index, leaves, nbytes, tree_map

FIELDS = ("obs", "actions", "rewards", "next_obs", "discounts")


def transitions(fragment: Fragment, gamma: float, n_step: int = 1, starts: int | None = None) -> dict[str, np.ndarray]:
    """The n-step transitions of a fragment's valid steps, flat (see the module docstring); with
    ``starts``, only of the steps in its first ``starts`` rows."""
    obs, rewards, valid = fragment.obs, fragment.rewards, fragment.valid
    terminated = fragment.terminated
    done = terminated | fragment.truncated
    T = len(valid)
    # obs_after[t] is the observation after step t: the next row, or the fragment's last observation
    obs_after = tree_map(lambda rows, last: np.concatenate([rows[1:], np.asarray(last, dtype=rows.dtype)[None]]),
                         obs, fragment.last_obs)
    reward_sum = np.zeros(rewards.shape, dtype=np.float32)
    discount = np.ones(rewards.shape, dtype=np.float32)
    ended = np.zeros(rewards.shape, dtype=bool)  # the transition stopped at an episode's end
    last = np.arange(T)[:, None] + np.zeros(rewards.shape[1], dtype=np.int64)  # index of its last step
    for k in range(n_step):
        t_k = np.arange(T) + k  # step k of the transition that starts at t
        inside = t_k < T
        if not inside.any():
            break
        rows = np.where(inside)[0]
        step = t_k[rows]
        live = ~ended[rows]  # (rows, env): still running at step k
        # step k > 0 must be a real step of the same episode: valid, and not past an episode end
        reward_sum[rows] += np.where(live, discount[rows] * rewards[step], 0.0)
        discount[rows] = np.where(live, discount[rows] * gamma, discount[rows])
        last[rows] = np.where(live, step[:, None], last[rows])
        ended[rows] |= live & done[step]
        if k == 0:
            continue
    # a terminated episode does not bootstrap
    terminal = terminated[last, np.arange(rewards.shape[1])[None, :]] & ended
    discount = np.where(terminal, 0.0, discount).astype(np.float32)
    envs = np.arange(rewards.shape[1])[None, :]
    next_obs = tree_map(lambda rows: rows[last, envs], obs_after)
    if starts is not None:
        valid = valid.copy()
        valid[starts:] = False
    mask = valid.reshape(-1)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])[mask]  # noqa: E731
    out = {"obs": tree_map(flat, obs), "actions": flat(fragment.actions), "rewards": flat(reward_sum),
           "next_obs": tree_map(flat, next_obs), "discounts": flat(discount)}
    if fragment.action_values is not None:
        out["td_errors"] = flat(_sampling_td_errors(fragment, reward_sum, discount, last))
    return out


def _sampling_td_errors(fragment: Fragment, reward_sum: np.ndarray, discount: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Each n-step transition's TD error by the policy that sampled it (Ape-X's first priority):
    ``reward_sum + discount * max_a Q(next_obs, a) - Q(obs, action)``, from the fragment's
    ``action_values`` and ``values`` (max_a Q: the policy's greedy value of each observation; after
    the last row, ``last_values``). NaN where the next observation's value is unknown (a streamed
    fragment's last observation): such a transition enters with the largest priority."""
    values = fragment.values.astype(np.float32)
    after_last = (np.full(values.shape[1], np.nan, np.float32) if fragment.last_values is None
                  else np.asarray(fragment.last_values, np.float32))
    values_after = np.concatenate([values[1:], after_last[None]])
    bootstrap = values_after[last, np.arange(values.shape[1])[None, :]]
    bootstrap = np.where(discount == 0, 0.0, bootstrap)  # terminated: nothing to bootstrap, known or not
    assert fragment.action_values is not None
    return (reward_sum + discount * bootstrap - fragment.action_values).astype(np.float32)


class NStepTransitions:
    """n-step transitions of a stream of fragments, windows crossing the fragments' ends.

    Of each fragment, the steps whose n-step window is complete inside it become transitions at
    once; its last ``n_step - 1`` rows (``n_step`` with ``action_values``: the bootstrap's value is
    the following row's) wait for the same worker's next fragment, and are put in
    front of it when it continues them (its first observation is the one they ended on; a worker
    replaced or reconfigured meanwhile starts anew: the held rows then become transitions on
    their own, shortened at their end as :func:`transitions` does).

        assemble = NStepTransitions(gamma=0.99, n_step=3)
        buffer.add(assemble(fragment))      # per fragment, in the order each worker sampled them
    """

    def __init__(self, gamma: float, n_step: int) -> None:
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        self.gamma, self.n_step = float(gamma), int(n_step)
        self._held: dict[int, Fragment] = {}  # worker index -> its last rows, not yet transitions

    def __call__(self, fragment: Fragment) -> dict[str, np.ndarray]:
        # With the sampling policy's values (Ape-X's actors), one row more waits: the value of the
        # observation after a transition's last step is the next row's, which then is at hand.
        hold = self.n_step - 1 + (fragment.action_values is not None)
        if hold == 0:
            return transitions(fragment, self.gamma, 1)
        key = fragment.worker_index
        held = self._held.pop(key, None)
        done_before: dict[str, np.ndarray] | None = None
        if held is not None:
            if _continues(held, fragment):
                fragment = _joined(held, fragment)
            else:
                done_before = transitions(held, self.gamma, self.n_step)
        T = fragment.num_steps
        keep = min(hold, T)
        self._held[key] = fragment if keep == T else fragment.split(T - keep)[1]
        out = transitions(fragment, self.gamma, self.n_step, starts=T - keep)
        if done_before is not None:
            joined: dict[str, Any] = {k: concat([done_before[k], out[k]]) for k in FIELDS  # Dict and Tuple obs too
                                      + (("td_errors",) if "td_errors" in out and "td_errors" in done_before else ())}
            return joined
        return out

    def reset(self) -> None:
        """Forget the held rows (the workers' envs start anew)."""
        self._held.clear()


def _joined(held: Fragment, fragment: Fragment) -> Fragment:
    """``held``'s rows followed by ``fragment``'s, as one fragment (``fragment``'s end)."""
    rows = {key: concat([getattr(held, key), getattr(fragment, key)]) for key in TIME_MAJOR
            if getattr(held, key) is not None and getattr(fragment, key) is not None}
    return fragment.replace(**rows)


def _continues(held: Fragment, fragment: Fragment) -> bool:
    """Whether ``fragment`` goes on from where ``held`` ended: same envs, the observation it
    starts from is the one ``held`` ended on."""
    firsts, lasts = leaves(index(fragment.obs, slice(None, 1))), leaves(held.last_obs)
    return len(firsts) == len(lasts) and all(
        first.shape == (1,) + np.shape(last) and bool(np.array_equal(first[0], last)) for first, last in zip(firsts, lasts))


class ReplayBuffer:
    """A FIFO ring buffer of transitions, sampled uniformly (see the module docstring).

    ``observations``: the observation space (each observation kept in its dtype: a uint8 image
    takes a byte a pixel), or for flat float32 vectors their length. Each transition holds its
    observation and its next observation, as SB3's default buffer does: 2 x an observation's
    bytes per transition (:attr:`bytes_per_transition`)."""

    def __init__(self, capacity: int, observations: gym.Space | int, action_shape: tuple[int, ...],
                 action_dtype: Any) -> None:
        if capacity < 1:
            raise ValueError(f"replay buffer capacity must be >= 1, got {capacity}")
        space = (gym.spaces.Box(-np.inf, np.inf, (observations,), np.float32) if isinstance(observations, int)
                 else observations)
        obs = ObsSpace(space)
        self.capacity = int(capacity)
        self.size = 0
        self._next = 0
        self.data: dict[str, Any] = {
            "obs": obs.empty((capacity,)),
            "actions": np.zeros((capacity,) + tuple(action_shape), dtype=action_dtype),
            "rewards": np.zeros(capacity, dtype=np.float32),
            "next_obs": obs.empty((capacity,)),
            "discounts": np.zeros(capacity, dtype=np.float32),
        }

    def __len__(self) -> int:
        return self.size

    @property
    def bytes_per_transition(self) -> int:
        """What one stored transition takes (observation, action, reward, next observation, discount)."""
        return sum(nbytes(index(value, slice(None, 1))) for value in self.data.values())

    def add(self, batch: dict[str, Any]) -> np.ndarray:
        """Append transitions, overwriting the oldest once full; returns the slots they took (of
        the newest ``capacity`` of them, when more came)."""
        n = len(batch["rewards"])
        if n > self.capacity:  # only the newest fit
            batch = {k: index(v, slice(-self.capacity, None)) for k, v in batch.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for key in FIELDS:
            tree_map(lambda store, rows: store.__setitem__(idx, rows), self.data[key], batch[key])  # noqa: B023
        self._next = (self._next + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        return idx

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        """``batch_size`` transitions drawn uniformly, with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = rng.integers(0, self.size, size=batch_size)
        return {key: index(self.data[key], idx) for key in FIELDS}

    def _order(self) -> np.ndarray:
        """The filled slots in insertion order, oldest first."""
        return (self._next - self.size + np.arange(self.size)) % self.capacity

    def state(self) -> dict[str, Any]:
        """The buffer's content in insertion order (for checkpoints), oldest first."""
        order = self._order()
        return {"capacity": self.capacity, **{key: index(self.data[key], order) for key in FIELDS}}

    def clear(self) -> None:
        self.size, self._next = 0, 0

    def load_state(self, state: dict[str, Any]) -> None:
        """Refill from :meth:`state` (the newest ``capacity`` transitions when it held more)."""
        self.clear()
        self.add({key: tree_map(np.asarray, state[key]) for key in FIELDS})
