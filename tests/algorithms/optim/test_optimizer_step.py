"""lean_step: the optimiser's own update, step for step, and every hook and profiler range still
seen whenever one is there to see it; build_without_dynamo: a learner's optimiser without
torch._dynamo's import, and torch's wrappers kept once it is imported."""

import doctest
import subprocess
import sys

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch import nn

import algorithms.optim.optimizer_step
from algorithms.optim.optimizer_step import build_without_dynamo, lean_step
from tests.conftest import ROOT
from tests.algorithms.optim.optimisers import OPTIMISERS as SHARED_OPTIMISERS
from tests.algorithms.optim.optimisers import small_net as _net

# the fused Adam too: the default of the trainers' Adam
OPTIMISERS = [(torch.optim.Adam, {"eps": 1e-5, "fused": True}), *SHARED_OPTIMISERS]


def _backward(net: nn.Module, step: int) -> None:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 3, generator=g)
    for p in net.parameters():
        p.grad = None
    ((net(x) - y) ** 2).mean().backward()


@pytest.mark.parametrize("cls,kwargs", OPTIMISERS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_lean_step_is_the_optimiser_step(cls, kwargs):
    ours, theirs = _net(0), _net(0)
    opt_ours, opt_theirs = cls(ours.parameters(), lr=1e-2, **kwargs), cls(theirs.parameters(), lr=1e-2, **kwargs)
    step = lean_step(opt_ours)
    for k in range(5):
        _backward(ours, k)
        step()
        _backward(theirs, k)
        opt_theirs.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)
        assert a.is_leaf and a.grad_fn is None  # the update ran outside autograd
    state_ours, state_theirs = opt_ours.state_dict()["state"], opt_theirs.state_dict()["state"]
    for i in state_theirs:
        for key, value in state_theirs[i].items():
            assert torch.equal(torch.as_tensor(state_ours[i][key]), torch.as_tensor(value)), key


def test_hooks_registered_after_the_step_was_made_still_run():
    net = _net(0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    step = lean_step(opt)
    calls = []
    handles = [
        register_optimizer_step_pre_hook(lambda o, args, kwargs: calls.append("global pre")),
        register_optimizer_step_post_hook(lambda o, args, kwargs: calls.append("global post")),
    ]
    try:  # global hooks: removed whatever happens, or every later optimiser in the session runs them
        _backward(net, 0)
        step()
        assert calls == ["global pre", "global post"]
    finally:
        for handle in handles:
            handle.remove()
    calls.clear()
    handle = opt.register_step_post_hook(lambda o, args, kwargs: calls.append("own post"))
    _backward(net, 1)
    step()
    assert calls == ["own post"]
    handle.remove()
    calls.clear()
    before = [p.detach().clone() for p in net.parameters()]
    _backward(net, 2)
    step()
    assert calls == []
    assert all(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_a_profiler_sees_the_optimiser_step():
    net = _net(0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    step = lean_step(opt)
    _backward(net, 0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    assert "Optimizer.step#Adam.step" in {event.name for event in prof.events()}


def test_a_differentiable_optimiser_keeps_its_own_step():
    opt = torch.optim.SGD([nn.Parameter(torch.ones(2))], lr=0.1, differentiable=True)
    assert lean_step(opt) == opt.step


def test_module_example():
    assert doctest.testmod(algorithms.optim.optimizer_step).failed == 0


_LEARNER_IN_A_FRESH_PROCESS = """
import sys
import torch
from algorithms.core.learner_config import make_optimizer
from algorithms.optim.optimizer_step import build_without_dynamo, lean_step
from tests.conftest import ROOT

net = torch.nn.Linear(3, 2)
optimizer = make_optimizer(list(net.parameters()), "adam", {}, 1e-2)
step = lean_step(optimizer)
for _ in range(2):
    optimizer.zero_grad(set_to_none=True)
    net(torch.ones(4, 3)).square().sum().backward()
    step()
optimizer.load_state_dict(optimizer.state_dict())
print("torch._dynamo" in sys.modules, optimizer.state_dict()["state"][0]["step"].item())
"""


def test_a_learner_builds_steps_saves_and_loads_its_optimiser_without_importing_dynamo():
    # torch._dynamo's import is more than a second of CPU in every trial's process
    proc = subprocess.run([sys.executable, "-c", _LEARNER_IN_A_FRESH_PROCESS], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "2.0"]


def test_once_dynamo_is_imported_torch_keeps_its_wrappers():
    import torch._dynamo  # noqa: F401 - what a user's torch.compile does first

    raw = torch.optim.Optimizer.zero_grad.__wrapped__
    before = getattr(raw, "__dynamo_disable", None)
    build_without_dynamo()
    assert getattr(raw, "__dynamo_disable", None) is before
