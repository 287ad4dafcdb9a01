"""ES and ARS: bad input, the shared pieces (centred ranks, the noise table, antithetic episodes),
each update by hand, checkpoints, and learning CartPole with rollout actors (ASHA and PBT:
tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms import ARS, ES
from algorithms.es.perturbations import NoiseTable, centered_ranks

#: In the learner's process, a small population and table.
SMALL = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 64, "noise_size": 100_000,
         "hidden_sizes": [8], "num_cpus_for_learner": 0.5}


@pytest.mark.parametrize("cls, config, key, match", [
    (ES, {"episodes_per_batch": 5}, "episodes_per_batch", "must be an even int >= 2"),
    (ES, {"sample_async": True}, "sample_async", "must be False: ES's actors play whole episodes"),
    (ES, {"model": {"hidden_sizes": [8]}}, "model", "ES perturbs its own MLP's flat parameters"),
    (ES, {"hidden_sizes": [0]}, "hidden_sizes", r"must be a list of ints >= 1 \(\[\]: a linear policy\)"),
    (ES, {"num_gpus_for_learner": 1}, "num_gpus_for_learner", "must be 0"),
    (ARS, {"rollouts_used": 40}, "rollouts_used", r"must be an int in \[1, num_rollouts \(32\)\]"),
    (ARS, {"noise_stdev": 0}, "noise_stdev", "must be a number > 0"),
    (ARS, {"noise_size": 5}, "noise_size", "must hold one direction, the policy.s 10 parameters"),
])
def test_bad_values_name_their_key(cls, config, key, match):
    with pytest.raises(ValueError, match=rf"config key '{key}': {match}"):
        cls(config={"env": "CartPole-v1", "num_workers": 0, **config})


def test_unknown_key_lists_the_allowed_ones():
    with pytest.raises(ValueError, match=r"ES config: unknown key 'num_rollouts'; allowed keys: \[.*'episodes_per_batch'"):
        ES(config={"env": "CartPole-v1", "num_rollouts": 8})


def test_centered_ranks_are_the_ranks_scaled_to_half_either_side_of_zero():
    ranks = centered_ranks(np.array([[3.0, -1.0], [10.0, 0.0]]))
    np.testing.assert_allclose(ranks, [[1 / 6, -0.5], [0.5, -1 / 6]], atol=1e-6)


def test_the_noise_table_is_the_seeds_and_a_direction_fits_in_it():
    a, b = NoiseTable(7, 1000), NoiseTable(7, 1000)
    np.testing.assert_array_equal(a.noise, b.noise)
    indices = a.sample_index(np.random.default_rng(0), dim=900, count=200)
    assert indices.min() >= 0 and indices.max() <= 100


def test_es_update_is_an_adam_step_along_the_ranked_antithetic_gradient():
    import torch

    trainer = ES(config={**SMALL, "seed": 0, "episodes_per_batch": 4, "l2_coeff": 0.0, "stepsize": 0.05})
    try:
        indices = np.array([3, 500])
        returns = np.array([[10.0, 2.0], [1.0, 7.0]])
        theta = trainer.policy.theta.copy()
        eps = np.stack([trainer.noise.get(i, len(theta)) for i in indices])
        ranks = centered_ranks(returns)
        gradient = (ranks[:, 0] - ranks[:, 1]) @ eps / 4
        reference = torch.nn.Parameter(torch.from_numpy(theta.copy()))
        adam = torch.optim.Adam([reference], lr=0.05)
        reference.grad = torch.from_numpy(-gradient)
        adam.step()
        trainer.update(indices, returns)
        np.testing.assert_allclose(trainer.policy.theta, reference.detach().numpy(), rtol=1e-6, atol=1e-7)
    finally:
        trainer.stop()


def test_ars_update_steps_along_the_best_directions_scaled_by_their_returns_spread():
    trainer = ARS(config={**SMALL, "seed": 0, "num_rollouts": 3, "rollouts_used": 2, "sgd_stepsize": 0.1})
    try:
        indices = np.array([0, 10, 20])
        returns = np.array([[5.0, 1.0], [0.0, 2.0], [1.0, 9.0]])  # best by their better return: 2 (9), 0 (5)
        theta = trainer.policy.theta.copy()
        eps = {i: trainer.noise.get(i, len(theta)) for i in indices}
        spread = np.std([1.0, 9.0, 5.0, 1.0])
        want = theta + 0.1 * ((1.0 - 9.0) * eps[20] + (5.0 - 1.0) * eps[0]) / (2 * spread)
        trainer.update(indices, returns)
        np.testing.assert_allclose(trainer.policy.theta, want, rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


def test_an_iteration_plays_antithetic_pairs_until_its_env_steps_and_round_trips(tmp_path):
    trainer = ES(config={**SMALL, "seed": 0, "episodes_per_batch": 4, "noise_stdev": 0.5})
    try:
        result = trainer.train()
        assert result["env_steps_this_iter"] >= 64 and result["episodes_this_iter"] % 4 == 0
        assert result["episodes_this_iter"] == result["episodes_this_population"]
        saved = trainer.save(str(tmp_path))
        theta = trainer.policy.theta.copy()
        obs = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        moments = trainer.optimizer.state_dict()["state"][0]["exp_avg"].clone()
    finally:
        trainer.stop()
    restored = ES(config={**SMALL, "seed": 0, "episodes_per_batch": 4, "noise_stdev": 0.5})
    try:
        restored.restore(saved)
        np.testing.assert_array_equal(restored.policy.theta, theta)
        np.testing.assert_array_equal(restored.compute_actions(obs, explore=False), actions)
        np.testing.assert_array_equal(restored.optimizer.state_dict()["state"][0]["exp_avg"], moments)
        restored.train()
        assert not np.array_equal(restored.policy.theta, theta)  # the optimiser steps the restored parameters
    finally:
        restored.stop()


@pytest.mark.parametrize("cls", [ES, ARS])
def test_learns_cartpole_with_rollout_actors(cls, ray_session):
    # A random policy's mean return is about 22; both pass 150 within 40k env steps on an idle machine.
    trainer = cls(config={"env": "CartPole-v1", "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.5,
                          "num_cpus_for_learner": 1, "noise_size": 1_000_000})
    try:
        best = 0.0
        while trainer.env_steps_total < 100_000 and best < 150:
            result = trainer.train()
            best = max(best, result["episode_return_mean"])
        assert result["sampling_layout"] == "2 rollout actors x 1 env, sync"
        assert best >= 150, f"{cls.__name__}: best mean return {best:.1f} in {trainer.env_steps_total} env steps"
    finally:
        trainer.stop()


def test_a_killed_rollout_actor_is_replaced_and_its_share_of_the_population_played_again(ray_session):
    import ray

    trainer = ES(config={**SMALL, "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.25, "episodes_per_batch": 8})
    try:
        trainer.train()
        victim = trainer.workers.actors[2]
        ray.kill(victim)
        result = trainer.train()
        assert result["num_worker_restarts"] == 1 and trainer.workers.actors[2] is not victim
        assert result["episodes_this_iter"] == result["episodes_this_population"] >= 8  # every pair played
    finally:
        trainer.stop()
