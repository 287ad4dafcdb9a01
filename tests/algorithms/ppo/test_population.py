"""PopulationPPO (algorithms/ppo/population.py): a pack's members each learn as they would alone.
One update of the stacked members equals each member's own update with torch.optim.Adam; GAE
uses each member's gamma and lambda; bad packs are one error naming pack_trials; a pack learns."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from algorithms.ppo.population import PopulationPPO, check_pack
from tests.algorithms.sampling.test_population_envs import StepCounting

MEMBERS = [{"lr": 1e-3, "clip_param": 0.1, "entropy_coeff": 0.0, "vf_loss_coeff": 0.5, "max_grad_norm": 0.5,
            "gamma": 0.99, "lambda_": 0.95, "seed": 0},
           {"lr": 3e-3, "clip_param": 0.3, "entropy_coeff": 0.01, "vf_loss_coeff": 1.0, "max_grad_norm": 10.0,
            "gamma": 0.9, "lambda_": 0.5, "seed": 1},
           {"lr": 1e-4, "clip_param": 0.2, "entropy_coeff": 0.05, "vf_loss_coeff": 0.25, "max_grad_norm": 0.01,
            "gamma": 0.5, "lambda_": 1.0, "seed": 2}]
SMALL = {"env": "CartPole-v1", "num_envs_per_worker": 2, "train_batch_size": 16, "minibatch_size": 8,
         "num_epochs": 1, "hidden_sizes": [8]}


@pytest.fixture
def pack():
    pack = PopulationPPO([{**SMALL, **m} for m in MEMBERS])
    yield pack
    pack.stop()


@pytest.mark.parametrize("configs, message", [
    ([], "a pack needs at least one member"),
    ([{"env": "CartPole-v1", "lr_schedule": "constant"}], "got ['lr_schedule']"),
    ([{"env": "CartPole-v1", "hidden_sizes": [8]}, {"env": "CartPole-v1", "hidden_sizes": [16]}],
     "members of a pack share 'hidden_sizes'"),
    ([{"lr": 1e-3}], "config key 'env' is required"),
    ([{"env": "CartPole-v1", "train_batch_size": 100, "num_envs_per_worker": 8}],
     "train_batch_size (100) must be a multiple of num_envs_per_worker (8)"),
])
def test_a_bad_pack_is_one_error_naming_pack_trials(configs, message):
    with pytest.raises(ValueError, match="^pack_trials: ") as info:
        check_pack(configs)
    assert message in str(info.value)


def test_an_env_outside_box_observations_and_discrete_actions_is_refused():
    with pytest.raises(ValueError, match="pack_trials: packed PPO takes a Box observation and Discrete actions"):
        PopulationPPO([{"env": "Pendulum-v1"}])


def _member_layers(pack: PopulationPPO, m: int, net: int) -> list[torch.Tensor]:
    """Member ``m``'s policy (net 0) or value (net 1) layers as leaf tensors (w, b, w, b, ...)."""
    layers = []
    last = len(pack.nets.weights) - 1
    for k, (w, b) in enumerate(zip(pack.nets.weights, pack.nets.biases)):
        w, b = w[m, net], b[m, net, 0]
        if net == 1 and k == last:  # the value's output: column 0
            w, b = w[:, :1], b[:1]
        layers += [torch.tensor(w.copy(), requires_grad=True), torch.tensor(b.copy(), requires_grad=True)]
    return layers


def _member_forward(layers: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    weights, biases = layers[0::2], layers[1::2]
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w + b
        if i < len(weights) - 1:
            x = torch.tanh(x)
    return x


def random_minibatch(pack: PopulationPPO, M: int = 8) -> dict[str, np.ndarray]:
    """A minibatch ``[P, M, ...]`` for ``pack.update``, with member 1's first 3 rows reset rows."""
    rng = np.random.default_rng(0)
    P = pack.P
    mb = {"obs": rng.standard_normal((P, M, pack.obs_dim)).astype(np.float32),
          "actions": rng.integers(0, 2, (P, M)), "logp": (-rng.random((P, M)) - 0.3).astype(np.float32),
          "adv": rng.standard_normal((P, M)).astype(np.float32),
          "returns": rng.standard_normal((P, M)).astype(np.float32), "valid": np.ones((P, M), dtype=np.float32)}
    mb["valid"][1, :3] = 0.0  # reset rows weigh nothing
    return mb


def test_one_update_is_each_members_own_adam_step(pack):
    P, mb = pack.P, random_minibatch(pack)
    before = [(_member_layers(pack, m, 0), _member_layers(pack, m, 1)) for m in range(P)]
    stats = pack.update(mb)
    for m, member in enumerate(MEMBERS):
        pi, vf = before[m]
        keep = mb["valid"][m].astype(bool)
        x, actions = torch.tensor(mb["obs"][m][keep]), torch.tensor(mb["actions"][m][keep])
        adv = torch.tensor(mb["adv"][m][keep])
        adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
        log_probs = torch.log_softmax(_member_forward(pi, x), dim=-1)
        ratio = (log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1) - torch.tensor(mb["logp"][m][keep])).exp()
        clip = member["clip_param"]
        policy_loss = -torch.minimum(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        vf_loss = 0.5 * ((_member_forward(vf, x).squeeze(-1) - torch.tensor(mb["returns"][m][keep])) ** 2).mean()
        entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
        loss = policy_loss + member["vf_loss_coeff"] * vf_loss - member["entropy_coeff"] * entropy
        optimizer = torch.optim.Adam(pi + vf, lr=member["lr"], eps=1e-5)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(pi + vf, member["max_grad_norm"])
        optimizer.step()
        assert stats["policy_loss"][m] == pytest.approx(policy_loss.item(), rel=1e-4, abs=1e-6)
        assert stats["vf_loss"][m] == pytest.approx(vf_loss.item(), rel=1e-4, abs=1e-6)
        after = (_member_layers(pack, m, 0), _member_layers(pack, m, 1))
        for mine, theirs in zip(after[0] + after[1], pi + vf):
            torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=1e-4, atol=1e-6)


def _gae_by_hand(rewards, values, terminated, done, valid, gamma, lam):
    T, adv, last = len(rewards), [0.0] * len(rewards), 0.0
    for t in reversed(range(T)):
        delta = rewards[t] + gamma * values[t + 1] * (1 - terminated[t]) - values[t]
        last = (delta + gamma * lam * (1 - done[t]) * last) * valid[t]
        adv[t] = last
    return adv


def test_gae_uses_each_members_gamma_and_lambda(pack):
    rng = np.random.default_rng(0)
    T, P, N = pack.T, pack.P, pack.N
    terminated = (rng.random((T, P, N)) < 0.15).astype(np.float32)
    truncated = (rng.random((T, P, N)) < 0.1).astype(np.float32)
    done = np.maximum(terminated, truncated)
    valid = np.ones((T, P, N), dtype=np.float32)
    valid[1:] = 1 - done[:-1]  # the step after an episode's end resets the env
    terminated, done = terminated * valid, done * valid
    batch = {"rewards": rng.random((T, P, N)).astype(np.float32) * valid,
             "values": rng.standard_normal((T + 1, P, N)).astype(np.float32),
             "terminated": terminated, "done": done, "valid": valid}
    adv = pack.advantages(batch)
    for m, member in enumerate(MEMBERS):
        for e in range(N):
            expected = _gae_by_hand(*(batch[k][:, m, e].tolist() for k in ("rewards", "values", "terminated", "done",
                                                                          "valid")), member["gamma"], member["lambda_"])
            np.testing.assert_allclose(adv[:, m, e], expected, rtol=1e-5, atol=1e-6)


def test_a_pack_learns_cartpole_and_reports_each_member():
    pack = PopulationPPO([{"env": "CartPole-v1", "seed": i, "lr": lr} for i, lr in enumerate((1e-3, 2.5e-3, 3e-3))])
    try:
        for _ in range(10):
            results = pack.train()
    finally:
        pack.stop()
    assert pack.iteration == 10 and len(results) == 3
    assert all(r["env_steps_total"] >= 10 * 2048 - 8 * 200 for r in results)  # reset steps are no env steps
    assert [r["cur_lr"] for r in results] == [1e-3, 2.5e-3, 3e-3]
    # from a random policy's 22: every member learns (measured: 150-250 at 20k env steps)
    assert all(r["episode_return_mean"] > 80 for r in results), [r["episode_return_mean"] for r in results]
    assert not any(math.isnan(r["policy_loss"]) for r in results)


def test_a_members_state_round_trips_into_another_pack(pack):
    for _ in range(2):
        pack.train()
    state = pack.member_state(1)
    other = PopulationPPO([{**SMALL, **m} for m in reversed(MEMBERS)])
    try:
        other.load_member_state(0, state)
        np.testing.assert_array_equal(other.nets.flat[0], pack.nets.flat[1])
        np.testing.assert_array_equal(other.adam.exp_avg_sq[0], pack.adam.exp_avg_sq[1])
        assert other.members[0]["lr"] == MEMBERS[1]["lr"] and other.adam.steps[0, 0] == pack.adam.steps[1, 0]
        assert other.env_steps[0] == pack.env_steps[1] and list(other.episodes[0]) == list(pack.episodes[1])
        wider = PopulationPPO([{**SMALL, "hidden_sizes": [16]}])
        try:
            with pytest.raises(ValueError, match="^pack_trials: a member state of"):
                wider.load_member_state(0, state)
        finally:
            wider.stop()
    finally:
        other.stop()


def test_an_exploit_inside_the_pack_copies_the_donors_slice_and_keeps_the_targets_curve(pack):
    pack.train()
    others = pack.nets.flat[2].copy()
    steps, episodes = int(pack.env_steps[1]), list(pack.episodes[1])
    pack.exploit(target=1, donor=0, config={"lr": 5e-4, "clip_param": 0.25})
    np.testing.assert_array_equal(pack.nets.flat[1], pack.nets.flat[0])
    np.testing.assert_array_equal(pack.adam.exp_avg[1], pack.adam.exp_avg[0])
    np.testing.assert_array_equal(pack.nets.flat[2], others)  # the rest of the pack is untouched
    assert pack.members[1]["lr"] == 5e-4 and pack.members[1]["clip_param"] == 0.25
    assert pack.members[1]["gamma"] == MEMBERS[0]["gamma"]  # the donor's, where the new config says nothing
    assert int(pack.env_steps[1]) == steps and list(pack.episodes[1]) == episodes
    results = pack.train()
    assert results[1]["cur_lr"] == 5e-4
    assert not np.array_equal(pack.nets.flat[1], pack.nets.flat[0])  # then each learns on its own


class _RaisesForSeven(gym.Env):
    """CartPole that raises at its 5th step when reset with a seed of member seed 7's envs."""

    def __init__(self, config=None):
        self.inner = gym.make("CartPole-v1")
        self.observation_space, self.action_space = self.inner.observation_space, self.inner.action_space
        self.bad, self.steps = False, 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.bad = seed // 10_000 == 7
        self.steps = 0
        return self.inner.reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.bad and self.steps == 5:
            raise RuntimeError("the simulator crashed")
        return self.inner.step(action)


def test_a_member_whose_env_raises_fails_alone_and_its_slot_gets_fresh_envs():
    pack = PopulationPPO([{**SMALL, "env": _RaisesForSeven, "seed": seed} for seed in (0, 7, 1)])
    try:
        results = pack.train()
        assert "error" not in results[0] and "error" not in results[2]
        assert "member 1's env raised" in results[1]["error"] and "the simulator crashed" in results[1]["error"]
        pack.join(1, {**SMALL, "seed": 3})  # a new trial in the slot: its envs and episodes its own
        results = pack.train()
        assert all("error" not in r for r in results) and pack.iteration == 2
    finally:
        pack.stop()


def test_a_member_that_does_not_learn_costs_no_env_step_and_keeps_its_state():
    StepCounting.STEPS.clear()
    pack = PopulationPPO([{**SMALL, **m, "env": StepCounting} for m in MEMBERS])
    try:
        before = pack.nets.row(1)
        results = pack.train([0, 2])
        assert len(results) == 2 and all(r["env_steps_total"] > 0 for r in results)
        assert [StepCounting.STEPS[m] for m in (0, 2)] == [r["env_steps_total"] for r in results]
        assert StepCounting.STEPS[1] == 0  # its envs waited: a stopped member's slot costs nothing to sample
        np.testing.assert_array_equal(pack.nets.row(1), before)
        results = pack.train()
        assert StepCounting.STEPS[1] == results[1]["env_steps_total"] > 0
    finally:
        pack.stop()


def test_members_with_fewer_epochs_sit_out_the_later_ones():
    pack = PopulationPPO([{**SMALL, **m, "num_epochs": epochs} for m, epochs in zip(MEMBERS, (1, 3, 2))])
    try:
        results = pack.train()
        after_one = [pack.nets.row(m) for m in range(pack.P)]
        count = SMALL["train_batch_size"] // SMALL["minibatch_size"]
        assert pack.adam.steps[:, 0].tolist() == [count, 3 * count, 2 * count]  # each member's own epochs
        assert all(math.isfinite(r["policy_loss"]) and math.isfinite(r["approx_kl"]) for r in results)
        pack.configure(1, {**MEMBERS[1], "num_epochs": 1})  # a PBT perturbation or a new config: its own
        pack.train()
        assert pack.adam.steps[:, 0].tolist() == [2 * count, 4 * count, 4 * count]
        assert all(not np.array_equal(pack.nets.row(m), after_one[m]) for m in range(pack.P))
    finally:
        pack.stop()
