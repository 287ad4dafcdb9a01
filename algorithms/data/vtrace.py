"""V-trace (Espeholt et al. 2018, IMPALA): value targets and policy-gradient advantages for a
fragment sampled by a behaviour policy ``mu`` older than the learner's ``pi``.

With ``rho_t = pi(a_t|x_t) / mu(a_t|x_t)``, ``rho_bar_t = min(rho_clip, rho_t)`` and
``c_t = lambda_ min(c_clip, rho_t)``::

    delta_t = rho_bar_t (r_t + gamma V(x_{t+1}) - V(x_t))
    v_t     = V(x_t) + delta_t + gamma c_t (v_{t+1} - V(x_{t+1}))
    A_t     = min(pg_rho_clip, rho_t) (r_t + gamma v_{t+1} - V(x_t))

On-policy (``rho`` = 1) with ``lambda_`` 1, ``v_t`` is the n-step return to the fragment's end and
``A_t`` its advantage: GAE with lambda 1 (``algorithms/data/gae.py``), which the tests check.
Episode ends are read as GAE reads them: a *terminated* step bootstraps with 0, a *truncated* one
with V(final observation), the value at the following autoreset step (or ``last_values``); the
correction never carries across either, and reset steps (``valid`` False) are no transitions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["vtrace"]


def vtrace(
    *,
    behaviour_logp: np.ndarray,
    target_logp: np.ndarray,
    values: np.ndarray,
    last_values: np.ndarray,
    rewards: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    valid: np.ndarray,
    gamma: float,
    rho_clip: float = 1.0,
    pg_rho_clip: float = 1.0,
    c_clip: float = 1.0,
    lambda_: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(value targets ``v``, policy-gradient advantages ``A``), both (T, N) float32, zero-weighted
    nowhere: read them only at ``valid`` steps. Arrays are time-major (T, N); ``last_values`` is
    V(the observation after the last step), (N,)."""
    valid = np.asarray(valid, dtype=bool)
    terminated = np.asarray(terminated, dtype=bool)
    values = np.asarray(values, dtype=np.float32)
    rho = np.exp(np.asarray(target_logp, np.float64) - np.asarray(behaviour_logp, np.float64)) * valid
    not_done = (~terminated).astype(np.float32)
    next_values = np.concatenate([values[1:], np.asarray(last_values, np.float32)[None]])
    deltas = (np.minimum(rho_clip, rho) * (rewards + gamma * next_values * not_done - values)).astype(np.float32)
    # the correction carries back only inside an episode, and only from a real transition
    carry = (gamma * lambda_ * np.minimum(c_clip, rho) * ~(terminated | np.asarray(truncated, bool))).astype(np.float32)
    correction = np.empty_like(values)
    acc = np.zeros_like(values[0])
    for t in range(len(values) - 1, -1, -1):
        acc = deltas[t] + carry[t] * acc
        correction[t] = acc
    vs = values + correction
    # v_{t+1}: at a reset step v is V (no transition there), i.e. V(final observation) after a truncation
    next_vs = np.concatenate([vs[1:], np.asarray(last_values, np.float32)[None]])
    advantages = np.minimum(pg_rho_clip, rho) * (rewards + gamma * next_vs * not_done - values)
    return vs.astype(np.float32), advantages.astype(np.float32)
