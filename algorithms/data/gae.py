"""Generalised advantage estimation (Schulman et al. 2016) on a fragment: what an on-policy
trainer learns from (PPO's, and a user's A2C: ``examples/a2c.py``)."""

from __future__ import annotations

import numpy as np

from algorithms.sampling.fragment import Fragment, TrainBatch
from algorithms.data.observations import tree_map


def compute_gae(fragment: Fragment, gamma: float, lambda_: float) -> TrainBatch:
    """Advantages and value targets of a fragment; returns the flat batch of its real transitions.

    ``values[t]`` is V(obs[t]) at sampling time. A step that *terminates* bootstraps with 0; one
    that is *truncated* (time limit) bootstraps with V(final observation), which in NEXT_STEP
    autoreset mode is the value the worker computed at the following reset step (or
    ``last_values`` at the end of the fragment); neither carries the advantage across. Reset
    steps (``valid`` False) are no transitions and are dropped. The fragment needs its
    ``last_values``.
    """
    values, rewards = fragment.values, fragment.rewards
    terminated, truncated, valid = fragment.terminated, fragment.truncated, fragment.valid
    if fragment.last_values is None:
        raise ValueError("compute_gae: the fragment has no last_values (a streamed fragment: bootstrap it first)")
    next_values = np.concatenate([values[1:], fragment.last_values[None].astype(np.float32)])
    # TD errors and the advantage's carry-over factor for every step at once, zero at reset steps:
    # adv[t] = delta[t] + carry[t] * adv[t + 1]
    delta = (rewards + gamma * next_values * ~terminated - values) * valid
    carry = ((gamma * lambda_) * (~(terminated | truncated) & valid)).astype(np.float32)
    advantages = np.empty_like(values)
    last = np.zeros_like(values[0])
    for t in range(len(values) - 1, -1, -1):
        last = delta[t] + carry[t] * last
        advantages[t] = last
    mask = valid.reshape(-1)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])[mask]  # noqa: E731
    obs = tree_map(flat, fragment.obs)
    env_steps = int(mask.sum())
    return TrainBatch(
        obs=obs, actions=flat(fragment.actions), logp=flat(fragment.logp), values=flat(values),
        advantages=flat(advantages), returns=flat(advantages + values), is_weight=np.ones(env_steps, np.float32),
        episode_returns=fragment.episode_returns, episode_lens=fragment.episode_lens, env_steps=env_steps,
        slots=int(mask.size),
    )
