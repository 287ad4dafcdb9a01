"""The built-in network's torch twin (algorithms/ppo/population_mlp_torch.py), what a PPO pack on a
GPU learns with: its members start as the numpy pack's from the same seeds, act alike and take the
same update, and their checkpoints are the numpy pack's (names, shapes, values). On the CPU, and
on a CUDA device where one is lent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms.optim.population_adam import PopulationAdam
from algorithms.ppo.packed import ppo_state
from algorithms.ppo.population import PopulationPPO
from algorithms.ppo.population_mlp_torch import builtin_stack
from tests.algorithms.ppo.test_population import MEMBERS, SMALL, random_minibatch

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=cuda)])
def twins(request):
    """Two packs of the same members: the numpy learner's, and one whose networks are the torch
    twin on the device (what ``num_gpus_for_learner`` gives a pack on a GPU)."""
    numpy_pack = PopulationPPO([{**SMALL, **m} for m in MEMBERS])
    torch_pack = PopulationPPO([{**SMALL, **m} for m in MEMBERS])
    sizes = numpy_pack.nets.sizes
    torch_pack.device = request.param
    torch_pack.nets = builtin_stack(sizes, [m["seed"] for m in MEMBERS], device=request.param)
    torch_pack.grad = torch_pack.nets.gradient_buffer()
    torch_pack.adam = PopulationAdam(torch_pack.P, torch_pack.grad.shape[1], request.param)
    yield numpy_pack, torch_pack
    numpy_pack.stop()
    torch_pack.stop()


def _policies(pack):
    return [ppo_state(pack, m, seed=0)["policy"] for m in range(pack.P)]


def _assert_same_members(numpy_pack, torch_pack, **tolerance):
    for mine, theirs in zip(_policies(torch_pack), _policies(numpy_pack)):
        assert list(mine) == list(theirs)  # the numpy learner's names, in its order
        for name in theirs:
            torch.testing.assert_close(mine[name], theirs[name], **tolerance)


def test_members_start_as_the_numpy_packs_and_act_alike(twins):
    numpy_pack, torch_pack = twins
    _assert_same_members(numpy_pack, torch_pack, rtol=0, atol=0)
    obs = np.random.default_rng(0).standard_normal((numpy_pack.P, 5, numpy_pack.obs_dim)).astype(np.float32)
    for mine, theirs in zip(torch_pack.nets.outputs(obs), numpy_pack.nets.outputs(obs)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_one_update_is_the_numpy_packs_and_a_checkpoint_moves_between_them(twins):
    numpy_pack, torch_pack = twins
    mb = random_minibatch(numpy_pack)
    for _ in range(3):
        mine, theirs = torch_pack.update(mb), numpy_pack.update(mb)
        for key in theirs:
            np.testing.assert_allclose(mine[key], theirs[key], rtol=1e-4, atol=1e-6)
    _assert_same_members(numpy_pack, torch_pack, rtol=1e-4, atol=1e-6)
    state = torch_pack.member_state(2)
    numpy_pack.load_member_state(0, state)  # an exploit across devices: the same slice
    np.testing.assert_array_equal(numpy_pack.adam.exp_avg[0], state["exp_avg"])
    torch_pack.nets.set_row(1, np.full(torch_pack.grad.shape[1], np.nan, dtype=np.float32))
    assert not torch_pack.nets.finite(1) and torch_pack.nets.finite(0)


def test_the_twin_pack_trains_exploits_and_rejoins_as_the_numpy_pack_does(twins):
    """The whole iteration on the twin (sampling with its outputs, GAE, epochs, a subset of
    members learning, an exploit's slice, a member rejoining): what a GPU pack runs, here on the
    device the fixture gives."""
    numpy_pack, torch_pack = twins
    for learning in (None, [0, 2]):
        mine, theirs = torch_pack.train(learning), numpy_pack.train(learning)
        assert [sorted(r) for r in mine] == [sorted(r) for r in theirs]
        assert not any("error" in r for r in mine), mine
        assert [r["env_steps_total"] for r in mine] == [r["env_steps_total"] for r in theirs]
    before = torch_pack.nets.row(1)
    torch_pack.train([0, 2])
    np.testing.assert_array_equal(torch_pack.nets.row(1), before)  # a member not learning keeps its state
    torch_pack.exploit(target=1, donor=0, config={"lr": 5e-4})
    np.testing.assert_array_equal(torch_pack.nets.row(1), torch_pack.nets.row(0))
    torch_pack.join(2, {**SMALL, **MEMBERS[2], "seed": 7})
    numpy_pack.join(2, {**SMALL, **MEMBERS[2], "seed": 7})
    mine, theirs = ppo_state(torch_pack, 2, seed=0)["policy"], ppo_state(numpy_pack, 2, seed=0)["policy"]
    for name in theirs:  # fresh from its new seed, as the numpy pack's member is
        torch.testing.assert_close(mine[name], theirs[name], rtol=0, atol=0)
    assert all(r["cur_lr"] == lr for r, lr in zip(torch_pack.train(), (MEMBERS[0]["lr"], 5e-4, MEMBERS[2]["lr"])))
