"""The numpy PPO update: autograd's loss and gradient, for every case it covers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from algorithms.optim.flat_adam import FlatAdam
from algorithms.ppo.model import make_actor_critic
from algorithms.ppo.fast.numpy_learner import NumpyPPOUpdate, covers


def _network(hidden: list[int], actions: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    net = make_actor_critic(obs_dim=4, action_space=gym.spaces.Discrete(actions), hidden_sizes=hidden,
                            activation="tanh")
    net.reset_parameters(gen)
    with torch.no_grad():  # a non-trivial value head and policy
        for w in net.weights:
            w.add_(0.3 * torch.randn(w.shape, generator=gen))
    return net, gen


@pytest.mark.parametrize("hidden, actions, ent_coeff, vf_clip", [
    ([64, 64], 2, 0.0, None), ([64, 64], 3, 0.01, None), ([16], 3, 0.01, None), ([8, 8, 8], 4, 0.0, None),
    ([64, 64], 2, 0.01, 0.1),
])
def test_numpy_loss_and_gradient_equal_autograd(hidden, actions, ent_coeff, vf_clip):
    net, gen = _network(hidden, actions, seed=1)
    adam = FlatAdam(list(net.parameters()), lr=1e-3)
    update = NumpyPPOUpdate(net, adam)
    n = 96
    obs = torch.randn(n, 4, generator=gen)
    acts = torch.randint(0, actions, (n,), generator=gen)
    returns, adv = torch.randn(n, generator=gen) * 3, torch.randn(n, generator=gen)
    with torch.no_grad():
        logp_now, _, values_now = net.evaluate(obs, acts)
    old_logp = logp_now + 0.4 * torch.randn(n, generator=gen)  # ratios from ~0.5 to ~2: many clipped
    old_values = values_now + 0.3 * torch.randn(n, generator=gen)  # some values clipped too
    clip, vf_coeff = 0.2, 0.5

    policy_loss, vf_loss, ratio, _ = update.loss_and_grad(
        obs.numpy(), acts.numpy(), old_logp.numpy(), old_values.numpy(), returns.numpy(), adv.numpy(),
        clip, vf_clip, vf_coeff, ent_coeff)
    assert (np.abs(ratio - 1) > clip).mean() > 0.2

    logp, entropy, values = net.evaluate(obs, acts, with_entropy=True)
    r = (logp - old_logp).exp()
    ref_policy = -torch.min(adv * r, adv * r.clamp(1 - clip, 1 + clip)).mean()
    if vf_clip is None:
        ref_vf = 0.5 * torch.nn.functional.mse_loss(values, returns)
    else:
        v_clipped = old_values + (values - old_values).clamp(-vf_clip, vf_clip)
        ref_vf = 0.5 * torch.max((values - returns) ** 2, (v_clipped - returns) ** 2).mean()
        assert ((values - old_values).abs() > vf_clip).float().mean() > 0.2
    loss = ref_policy + vf_coeff * ref_vf - ent_coeff * entropy.mean()
    ref_grads = torch.autograd.grad(loss, list(net.parameters()))
    assert policy_loss == pytest.approx(float(ref_policy.detach()), rel=1e-5, abs=1e-6)
    assert vf_loss == pytest.approx(float(ref_vf.detach()), rel=1e-5, abs=1e-6)
    for g, ref in zip(adam.flat_views(update.grad), ref_grads):
        torch.testing.assert_close(torch.from_numpy(g), ref, rtol=1e-4, atol=1e-6)


def test_numpy_update_reads_the_live_parameters():
    """The update works on views of the optimiser's buffer: after a step it sees the new weights."""
    net, gen = _network([8], 2, seed=2)
    adam = FlatAdam(list(net.parameters()), lr=1e-1)
    update = NumpyPPOUpdate(net, adam)
    n = 32
    args = (np.random.default_rng(0).standard_normal((n, 4), dtype=np.float32), np.zeros(n, dtype=np.int64),
            np.full(n, -0.7, np.float32), np.zeros(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32),
            0.2, None, 0.5, 0.0)
    first = update.loss_and_grad(*args)[1]
    adam.step_flat(update.grad)
    with torch.no_grad():
        net.load_state_dict({k: torch.zeros_like(v) for k, v in net.state_dict().items()})  # in place
    assert update.loss_and_grad(*args)[1] == pytest.approx(0.5) != pytest.approx(first)


def test_covers_only_categorical_tanh_networks():
    box = make_actor_critic(4, gym.spaces.Box(-1, 1, (2,)), [8], "tanh")
    relu = make_actor_critic(4, gym.spaces.Discrete(2), [8], "relu")
    tanh = make_actor_critic(4, gym.spaces.Discrete(2), [8], "tanh")
    assert (covers(box), covers(relu), covers(tanh)) == (False, False, True)
    with pytest.raises(ValueError, match="Categorical policies with tanh"):
        NumpyPPOUpdate(relu, FlatAdam(list(relu.parameters()), lr=1e-3))
