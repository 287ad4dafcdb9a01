"""Ape-X DQN: its bad input, the actors' first priorities (by hand, and from streaming actors),
learning CartPole on a ladder of epsilons (ASHA and PBT: tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from algorithms import APEX, DQN
from algorithms.data.prioritized_replay import PrioritizedReplayBuffer
from algorithms.data.replay_buffer import NStepTransitions, transitions
from algorithms.sampling.fragment import Fragment


def test_an_epsilon_ladder_with_one_actor_is_one_error_naming_the_key():
    with pytest.raises(ValueError, match=r"config key 'per_worker_exploration': an epsilon ladder needs "
                                         r"num_workers >= 2 rollout actors \(num_workers is 1\)"):
        APEX(config={"env": "CartPole-v1", "num_workers": 1})
    with pytest.raises(ValueError, match="config key 'per_worker_exploration': an epsilon ladder needs"):
        DQN(config={"env": "CartPole-v1", "per_worker_exploration": True})  # asked for, with no actors


def test_unknown_keys_and_a_box_action_space_are_refused():
    with pytest.raises(ValueError, match=r"APEX config: unknown key 'clip_param'; allowed keys: \[.*'n_step'"):
        APEX(config={"env": "CartPole-v1", "clip_param": 0.2})
    with pytest.raises(ValueError, match="config key 'env': APEX needs a Discrete action space"):
        APEX(config={"env": "Pendulum-v1", "num_workers": 0, "per_worker_exploration": False})


T, N = 8, 2


def _fragment(last_values) -> Fragment:
    """Env 0 terminates at step 2 (reset step 3), env 1 is truncated at step 4 (reset step 5)."""
    rng = np.random.default_rng(0)
    terminated, truncated, valid = np.zeros((T, N), bool), np.zeros((T, N), bool), np.ones((T, N), bool)
    terminated[2, 0], valid[3, 0] = True, False
    truncated[4, 1], valid[5, 1] = True, False
    return Fragment(obs=rng.normal(size=(T, N, 3)).astype(np.float32), actions=rng.integers(0, 2, (T, N)),
                    logp=np.zeros((T, N), np.float32), values=rng.normal(size=(T, N)).astype(np.float32),
                    rewards=rng.normal(size=(T, N)).astype(np.float32) * valid, terminated=terminated,
                    truncated=truncated, valid=valid, last_obs=rng.normal(size=(N, 3)).astype(np.float32),
                    last_values=last_values, episode_returns=np.zeros(0), episode_lens=np.zeros(0),
                    action_values=rng.normal(size=(T, N)).astype(np.float32))


def test_a_transitions_first_td_error_is_the_sampling_policys():
    f = _fragment(last_values=np.array([0.5, -0.5], np.float32))
    out = transitions(f, gamma=0.9, n_step=2)
    rows = [(t, n) for t in range(T) for n in range(N) if f.valid[t, n]]
    want = []
    for t, n in rows:  # by hand: two steps, or fewer at an episode's or the fragment's end
        r, k, boot = f.rewards[t, n], 1, None
        if f.terminated[t, n]:
            boot = 0.0
        elif f.truncated[t, n]:
            boot = f.values[t + 1, n]  # the reset step's: the final observation's max Q
        elif t + 1 == T:
            boot = f.last_values[n]
        else:
            r, k = r + 0.9 * f.rewards[t + 1, n], 2
            if f.terminated[t + 1, n]:
                boot = 0.0
            else:
                boot = f.values[t + 2, n] if t + 2 < T else f.last_values[n]
        want.append(r + 0.9 ** k * boot - f.action_values[t, n])
    np.testing.assert_allclose(out["td_errors"], want, rtol=1e-5, atol=1e-6)


def test_a_streamed_fragments_rows_wait_for_the_value_after_them_and_the_unknown_take_the_largest_priority():
    f = _fragment(last_values=None)  # streamed: V(last_obs) is not known yet
    assert np.isnan(transitions(f, gamma=0.9, n_step=1)["td_errors"]).sum() == N  # the last row's, one per env
    assemble = NStepTransitions(gamma=0.9, n_step=1)
    first = assemble(f)
    assert not np.isnan(first["td_errors"]).any() and len(first["rewards"]) == f.valid[:-1].sum()  # the last waits
    buffer = PrioritizedReplayBuffer(64, 3, (), np.int64, alpha=1.0)
    buffer.add(first)
    np.testing.assert_allclose(buffer.tree.get(np.arange(buffer.size)), np.abs(first["td_errors"]) + 1e-6, rtol=1e-6)
    largest = buffer.max_priority
    nan_batch = {**first, "td_errors": np.full(len(first["rewards"]), np.nan, np.float32)}
    slots = buffer.add(nan_batch)
    np.testing.assert_allclose(buffer.tree.get(slots), largest)


def test_streaming_actors_on_a_ladder_learn_cartpole_and_give_first_priorities(ray_session):
    # The return is over both actors' episodes, the exploring one's (epsilon 0.4) many and short:
    # from a random policy's 22 it passes 60 near 20k env steps on an idle machine (100 near 35k).
    trainer = APEX(config={"env": "CartPole-v1", "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.25,
                           "num_cpus_for_learner": 1, "hidden_sizes": [64], "lr": 1e-3,
                           "min_sample_timesteps_per_iteration": 4000})
    try:
        np.testing.assert_allclose(trainer.policy.epsilons[1:], [0.4, 0.4 ** 8], rtol=1e-5)  # the ladder's ends
        best = 0.0
        while trainer.env_steps_total < 60_000 and best < 60:
            result = trainer.train()
            best = max(best, result["episode_return_mean"])
        assert result["sampling_layout"] == "2 rollout actors x 1 env, async"
        assert best >= 60, f"best mean return {best:.1f} in {trainer.env_steps_total} env steps"
        # the learner kept the replay ratio: an update per train_freq (4) env steps taken
        assert result["num_updates"] == pytest.approx((trainer.env_steps_total - 1000) / 4, rel=0.05)
        # the actors' priorities: as many as the transitions, not one largest priority for all new ones
        assert isinstance(trainer.buffer, PrioritizedReplayBuffer)
        priorities = trainer.buffer.tree.get(np.arange(trainer.buffer.size))
        assert len(np.unique(priorities)) > trainer.buffer.size // 2
    finally:
        trainer.stop()


def test_a_user_q_module_on_actors_records_its_action_values(ray_session):
    from torch import nn

    def q_model(observation_space: gym.Space, action_space: gym.Space, model_config: dict) -> nn.Module:
        return nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.ReLU(), nn.Linear(16, action_space.n))

    trainer = APEX(config={"env": "CartPole-v1", "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.25,
                           "num_cpus_for_learner": 0.5, "model": q_model, "learning_starts": 64,
                           "min_sample_timesteps_per_iteration": 256})
    try:
        trainer.train()
        fragment = trainer.sample(32)[0]
        assert fragment.action_values is not None and fragment.action_values.shape == fragment.valid.shape
    finally:
        trainer.stop()
