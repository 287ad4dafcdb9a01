"""FlatParameters: one buffer behind a module's parameters and one behind their gradients, with the
numbers of the per-parameter optimisers and clipping, and their state in the per-parameter layout."""

import pytest
import torch
from torch import nn

from algorithms.optim.flat_params import FlatParameters
from tests.algorithms.optim.optimisers import OPTIMISERS
from tests.algorithms.optim.optimisers import small_net as _net

def _loss(net: nn.Module, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 3, generator=g)
    return ((net(x) - y) ** 2).mean() * 10  # large enough that clipping bites


@pytest.mark.parametrize("cls,kwargs", OPTIMISERS, ids=lambda v: getattr(v, "__name__", ""))
def test_flat_updates_are_the_per_parameter_updates(cls, kwargs):
    ours, theirs = _net(0), _net(0)
    flat = FlatParameters(list(ours.parameters()))
    opt_ours = cls([flat.flat], lr=1e-2, **kwargs)
    opt_theirs = cls(theirs.parameters(), lr=1e-2, **kwargs)
    clipped = 0
    for step in range(12):
        flat.zero_grad()
        _loss(ours, step).backward()
        norm = flat.clip_grad_norm_(0.5)
        opt_ours.step()
        opt_theirs.zero_grad()
        _loss(theirs, step).backward()
        reference = torch.nn.utils.clip_grad_norm_(list(theirs.parameters()), 0.5)
        opt_theirs.step()
        torch.testing.assert_close(norm, reference, rtol=1e-5, atol=1e-6)
        clipped += float(reference) > 0.5
    assert clipped > 0
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_parameters_and_gradients_are_views_of_the_buffers():
    net = _net(1)
    params = list(net.parameters())
    flat = FlatParameters(params)
    flat.zero_grad()
    _loss(net, 0).backward()
    for p, offset in zip(params, flat.offsets):
        assert p.data_ptr() == flat.flat.data_ptr() + offset * p.element_size()
        assert p.grad.data_ptr() == flat.grad.data_ptr() + offset * p.element_size()
    assert float(flat.grad.abs().sum()) > 0
    with torch.no_grad():
        flat.flat.add_(1.0)  # a step on the buffer is a step on the module
    assert torch.equal(params[0].reshape(-1), flat.flat[: params[0].numel()])


@pytest.mark.parametrize("cls,kwargs", OPTIMISERS, ids=lambda v: getattr(v, "__name__", ""))
def test_optimiser_state_moves_between_the_layouts(cls, kwargs):
    """A per-parameter optimiser's state joins into the flat one, which then steps as the
    per-parameter one does; split, it is the per-parameter state again."""
    ours, theirs = _net(2), _net(2)
    opt_theirs = cls(theirs.parameters(), lr=1e-2, **kwargs)
    for step in range(3):
        opt_theirs.zero_grad()
        _loss(theirs, step).backward()
        opt_theirs.step()
    ours.load_state_dict(theirs.state_dict())
    flat = FlatParameters(list(ours.parameters()))
    opt_ours = cls([flat.flat], lr=1e-2, **kwargs)
    assert flat.join_state({0: {}}) == {}  # an incomplete state is no state
    opt_ours.load_state_dict({**opt_ours.state_dict(), "state": flat.join_state(opt_theirs.state_dict()["state"])})
    for step in range(3, 6):
        flat.zero_grad()
        _loss(ours, step).backward()
        opt_ours.step()
        opt_theirs.zero_grad()
        _loss(theirs, step).backward()
        opt_theirs.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    split = flat.split_state(opt_ours.state_dict()["state"])
    reference = opt_theirs.state_dict()["state"]
    assert split.keys() == reference.keys()
    for i in reference:
        assert split[i].keys() == reference[i].keys()
        for key, value in reference[i].items():
            torch.testing.assert_close(split[i][key], value, rtol=1e-5, atol=1e-6)


def test_a_state_of_other_shapes_is_refused_by_name():
    flat = FlatParameters(list(_net(3).parameters()))
    other = FlatParameters(list(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.LayerNorm(8), nn.Linear(8, 3)).parameters()))
    opt = torch.optim.Adam([other.flat])
    other.zero_grad()
    other.flat.grad.fill_(1.0)
    opt.step()
    with pytest.raises(ValueError, match="'exp_avg' of parameter 0 has shape"):
        flat.join_state(other.split_state(opt.state_dict()["state"]))


def test_which_parameter_lists_fit():
    net = _net(4)
    assert FlatParameters.fits(list(net.parameters()))
    assert not FlatParameters.fits([])
    mixed = [nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    assert not FlatParameters.fits(mixed)
    frozen = [nn.Parameter(torch.zeros(2), requires_grad=False)]
    assert not FlatParameters.fits(frozen) and FlatParameters.fits(frozen, grads=False)
    shared = nn.Parameter(torch.zeros(2))
    assert not FlatParameters.fits([shared, shared])
    with pytest.raises(ValueError, match="one dtype"):
        FlatParameters(mixed)


def test_a_scalar_parameter_keeps_its_own_moments():
    """A 0-dim parameter (a learnt temperature, say) has 0-dim moments: per element, not shared."""
    scale = nn.Parameter(torch.tensor(0.5))
    weight = nn.Parameter(torch.ones(3))
    reference = torch.optim.Adam([scale, weight], lr=0.1)
    (scale * weight.sum() * 3).backward()
    reference.step()
    flat = FlatParameters([nn.Parameter(torch.tensor(0.5)), nn.Parameter(torch.ones(3))])
    joined = flat.join_state(reference.state_dict()["state"])
    torch.testing.assert_close(joined[0]["exp_avg"], torch.cat([reference.state[scale]["exp_avg"].reshape(1),
                                                                 reference.state[weight]["exp_avg"]]))
    split = flat.split_state(joined)
    assert split[0]["exp_avg"].shape == () and split[1]["exp_avg"].shape == (3,)
