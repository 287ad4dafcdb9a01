"""``optimizer.step()`` for a learner that steps a small network thousands of times.

torch wraps every optimiser's ``step`` (``Optimizer.profile_hook_step``): each call opens a
profiler range, two ``torch.ops.profiler`` calls through Python, and runs the global and the
optimiser's own step hooks. On a CPU that Python costs about as much as the fused Adam update of
a 64x64 policy (benchmarks/RESULTS.md has the figures). A trainer builds and owns its optimiser, so :func:`lean_step`
returns a callable that runs the optimiser's own update under ``torch.no_grad()`` (what the
wrapper does for a non-differentiable optimiser) without the range, as long as no step hook is
registered, globally or on the optimiser, and no profiler is recording; when one is, it calls
``optimizer.step()``, so hooks and profiler traces see every step as they otherwise would.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> step = lean_step(torch.optim.SGD([w], lr=0.5))
    >>> w.grad = torch.ones(3)
    >>> step()
    >>> w.tolist()
    [0.5, 0.5, 0.5]
"""

from __future__ import annotations

import inspect
import sys
from typing import Callable

import torch
from torch.optim import optimizer as optimizer_module

_HOOK_ATTRS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
_GLOBAL_HOOK_ATTRS = ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")
#: The ``torch.optim.Optimizer`` methods torch wraps in ``torch._disable_dynamo``.
_DYNAMO_DISABLED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")


def build_without_dynamo() -> None:
    """Let torch's optimisers be built, zeroed, saved and loaded without importing ``torch._dynamo``.

    torch marks four ``Optimizer`` methods as never to be compiled with ``torch._disable_dynamo``,
    whose wrapper imports ``torch._dynamo`` on the method's first call (more than a second of CPU
    in every learner's process: a trial's start) to build the disabled version, then keeps it on
    the method as ``__dynamo_disable``. While ``torch._dynamo`` is not imported nothing in the
    process has been compiled, and a learner never compiles its optimiser's calls: so the method
    itself goes in that slot, and the calls run as they run uncompiled. Once ``torch._dynamo`` is
    imported (a user's ``torch.compile`` first) this does nothing; where torch changes the wrapper
    (no ``__wrapped__``), it leaves it alone.
    """
    if "torch._dynamo" in sys.modules:
        return
    for name in _DYNAMO_DISABLED:
        method = getattr(torch.optim.Optimizer, name, None)
        raw = getattr(method, "__wrapped__", None)
        if raw is not None and getattr(raw, "__dynamo_disable", None) is None:
            raw.__dynamo_disable = raw


def lean_step(optimizer: torch.optim.Optimizer) -> Callable[[], None]:
    """A callable doing ``optimizer.step()`` without torch's per-call profiler range while nothing
    hooks or profiles it (see the module). Falls back to ``optimizer.step`` itself where this
    torch has no such wrapper, or for a differentiable optimiser."""
    wrapped = type(optimizer).step
    update = inspect.unwrap(wrapped)
    global_hooks = [getattr(optimizer_module, name, None) for name in _GLOBAL_HOOK_ATTRS]
    if (update is wrapped or any(h is None for h in global_hooks)
            or not all(hasattr(optimizer, name) for name in _HOOK_ATTRS)
            or any(group.get("differentiable") for group in optimizer.param_groups)):
        return optimizer.step
    pre_global, post_global = global_hooks
    profiling = torch.autograd._profiler_enabled

    def step() -> None:
        # the optimiser's hook dicts are read each call: load_state_dict may replace them
        if (pre_global or post_global or optimizer._optimizer_step_pre_hooks
                or optimizer._optimizer_step_post_hooks or profiling()):
            optimizer.step()
            return
        with torch.no_grad():
            update(optimizer)

    return step
