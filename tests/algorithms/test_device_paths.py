"""A pack's device path on the CPU, made as strict as CUDA about host and device memory.

On a GPU, numpy cannot read a tensor implicitly (``np.asarray(tensor)`` raises; only an explicit
``.cpu().numpy()`` crosses), while on the CPU it silently can, so a population that mixes them
passes every CPU test and fails on its first GPU iteration. Here ``Tensor.__array__`` raises, as
on CUDA, while DQN's and SAC's populations and PPO's torch twin (what a GPU pack runs) train
(every member, then a subset) and take a member's checkpoint into another slot, as an exploit
inside the pack does. The CUDA runs
themselves are in ``test_learner_device.py``, where a device is lent."""

from __future__ import annotations

import pytest
import torch

from algorithms.dqn.packed import dqn_state, load_dqn_state
from algorithms.dqn.population import PopulationDQN
from algorithms.optim.population_adam import PopulationAdam
from algorithms.ppo.packed import load_ppo_state, ppo_state
from algorithms.ppo.population import PopulationPPO
from algorithms.ppo.population_mlp_torch import builtin_stack
from algorithms.sac.packed import load_sac_state, sac_state
from algorithms.sac.population import PopulationSAC

OFF_POLICY = {"num_envs_per_worker": 2, "train_batch_size": 8, "train_freq": 4, "hidden_sizes": [8],
              "min_sample_timesteps_per_iteration": 16, "num_steps_sampled_before_learning_starts": 8,
              "replay_buffer_config": {"capacity": 100}}
PPO = {"env": "CartPole-v1", "num_envs_per_worker": 2, "train_batch_size": 16, "minibatch_size": 8,
       "hidden_sizes": [8]}


def _refuse(self, *args, **kwargs):
    raise TypeError("numpy read a tensor implicitly: on a GPU this fails (cross with .cpu().numpy())")


@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "__array__", _refuse)


def _twin_ppo() -> PopulationPPO:
    """A PPO pack on the torch twin, as ``num_gpus_for_learner`` gives one, on the CPU; members
    with different epochs (the later ones run as a pack of their own)."""
    pack = PopulationPPO([{**PPO, "seed": m, "num_epochs": 1 + m} for m in range(3)])
    pack.nets = builtin_stack(pack.nets.sizes, [0, 1, 2], device="cpu")
    pack.grad = pack.nets.gradient_buffer()
    pack.adam = PopulationAdam(pack.P, pack.grad.shape[1], "cpu")
    return pack


@pytest.mark.parametrize("make, save, load", [
    (lambda: PopulationDQN([{**OFF_POLICY, "env": "CartPole-v1", "seed": m} for m in range(3)]), dqn_state,
     load_dqn_state),
    (lambda: PopulationSAC([{**OFF_POLICY, "env": "Pendulum-v1", "seed": m} for m in range(3)]), sac_state,
     load_sac_state),
    (_twin_ppo, ppo_state, load_ppo_state),
], ids=["DQN", "SAC", "PPO-twin"])
def test_a_pack_crosses_between_host_and_device_only_explicitly(strict, make, save, load):
    pack = make()
    try:
        for learning in (None, [0, 2], None):
            results = pack.train(learning)
            assert not any("error" in r for r in results), results
        load(pack, 1, save(pack, 0, seed=0))  # an exploit inside the pack: the donor's checkpoint state...
        pack.configure(1, {**pack.members[0], "lr": 5e-4})  # ...and its perturbed config
        results = pack.train()
        assert results[1]["cur_lr"] == 5e-4 and not any("error" in r for r in results), results
    finally:
        pack.stop()
