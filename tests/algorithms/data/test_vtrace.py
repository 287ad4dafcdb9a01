"""V-trace: on-policy it is GAE with lambda 1; off-policy it is the paper's sum, step by step."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.data.gae import compute_gae
from algorithms.data.vtrace import vtrace
from algorithms.sampling.fragment import Fragment

T, N = 12, 3


def _steps(seed: int) -> dict[str, np.ndarray]:
    """A fragment's arrays with NEXT_STEP autoresets: env 0 terminates at 3 (reset step 4), env 1
    is truncated at 6 (reset step 7, whose value is V(final observation)), env 2 runs through."""
    rng = np.random.default_rng(seed)
    terminated, truncated, valid = (np.zeros((T, N), bool) for _ in range(3))
    valid[:] = True
    terminated[3, 0], valid[4, 0] = True, False
    truncated[6, 1], valid[7, 1] = True, False
    rewards = rng.normal(size=(T, N)).astype(np.float32) * valid
    return {"values": rng.normal(size=(T, N)).astype(np.float32), "last_values": rng.normal(size=N).astype(np.float32),
            "rewards": rewards, "terminated": terminated, "truncated": truncated, "valid": valid}


def test_on_policy_it_is_gae_with_lambda_one():
    s = _steps(0)
    logp = np.random.default_rng(1).normal(size=(T, N)).astype(np.float32)
    vs, advantages = vtrace(behaviour_logp=logp, target_logp=logp, gamma=0.9, **s)
    fragment = Fragment(obs=np.zeros((T, N, 1), np.float32), actions=np.zeros((T, N), np.int64), logp=logp,
                        values=s["values"], rewards=s["rewards"], terminated=s["terminated"], truncated=s["truncated"],
                        valid=s["valid"], last_obs=np.zeros((N, 1), np.float32), last_values=s["last_values"],
                        episode_returns=np.zeros(0), episode_lens=np.zeros(0))
    gae = compute_gae(fragment, gamma=0.9, lambda_=1.0)
    mask = s["valid"]
    np.testing.assert_allclose(vs[mask], gae.returns, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(advantages[mask], gae.advantages, rtol=1e-5, atol=1e-5)


def _by_the_paper(s, target, behaviour, gamma, rho_clip, pg_rho_clip, c_clip):
    """v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (c_s ... c_{t-1}) delta_t, term by term over each
    episode's steps in the fragment; A_s = rho_bar_s (r_s + gamma v_{s+1} - V(x_s))."""
    values, rewards = s["values"], s["rewards"]
    rho = np.exp(target - behaviour)
    vs = values.astype(np.float64).copy()
    adv = np.zeros((T, N))

    def next_value(t, n):  # V(x_{t+1}): the next step's, or the fragment's bootstrap
        return s["last_values"][n] if t + 1 == T else values[t + 1, n]

    def ends(t, n):
        return s["terminated"][t, n] or s["truncated"][t, n]

    for n in range(N):
        for i in range(T):
            if not s["valid"][i, n]:
                continue
            total, weight = 0.0, 1.0
            for t in range(i, T):
                boot = 0.0 if s["terminated"][t, n] else next_value(t, n)
                total += gamma ** (t - i) * weight * min(rho_clip, rho[t, n]) * (rewards[t, n] + gamma * boot - values[t, n])
                if ends(t, n):
                    break
                weight *= min(c_clip, rho[t, n])
            vs[i, n] += total
    for n in range(N):
        for i in range(T):
            if not s["valid"][i, n]:
                continue
            if s["terminated"][i, n]:
                following = 0.0
            elif i + 1 == T:
                following = s["last_values"][n]
            else:
                following = vs[i + 1, n]  # a reset step's v is its V: the final observation's value
            adv[i, n] = min(pg_rho_clip, rho[i, n]) * (rewards[i, n] + gamma * following - values[i, n])
    return vs, adv


@pytest.mark.parametrize("rho_clip, pg_rho_clip, c_clip", [(1.0, 1.0, 1.0), (2.0, 1.5, 0.8), (100.0, 100.0, 100.0)])
def test_off_policy_it_is_the_papers_sum(rho_clip, pg_rho_clip, c_clip):
    s = _steps(2)
    rng = np.random.default_rng(3)
    behaviour = rng.normal(size=(T, N)).astype(np.float32) - 1.0
    target = behaviour + rng.normal(scale=0.7, size=(T, N)).astype(np.float32)  # ratios both sides of 1
    vs, advantages = vtrace(behaviour_logp=behaviour, target_logp=target, gamma=0.95, rho_clip=rho_clip,
                            pg_rho_clip=pg_rho_clip, c_clip=c_clip, **s)
    want_vs, want_adv = _by_the_paper(s, target, behaviour, 0.95, rho_clip, pg_rho_clip, c_clip)
    mask = s["valid"]
    np.testing.assert_allclose(vs[mask], want_vs[mask], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(advantages[mask], want_adv[mask], rtol=1e-4, atol=1e-4)
    assert np.all(advantages[~mask] == 0)
