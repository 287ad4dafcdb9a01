"""A user's torch module (the model contract) as every member's network of a PPO population.

P copies of the module ``config["model"]`` builds, each drawn from its member's seed, run as one
(``algorithms/models/stacked.py``: ``torch.func.vmap`` over the members' stacked parameters,
which live in the population's flat buffer ``[P, D]``, as the built-in MLP's do). The loss is
PPO's in torch, summed over members: no parameter is shared, so each member's gradient is its
own loss's. :func:`stack_check` tries exactly that on two copies and a batch of the observation space, so a
sweep knows before packing; a module that does not stack runs its trials unpacked.

    nets = StackedModules(make_my_model, {"width": 64}, env.observation_space, env.action_space, seeds=[0, 1])
    logits, values = nets.outputs(obs)          # obs [P, B, obs_dim] -> [P, B, A], [P, B]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from algorithms.models import stacked

if TYPE_CHECKING:
    import gymnasium as gym
    import torch
    from torch import nn

F32 = np.float32

__all__ = ["StackedModules", "stack_check"]


def build_member(factory: Callable[..., Any], model_config: Mapping[str, Any], obs_space: gym.Space,
                 act_space: gym.Space, seed: int) -> nn.Module:
    """The module ``factory`` builds, its initial weights drawn from ``seed`` (torch's global
    generator forked: the caller's draws go on as they were)."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(int(seed))
        module = factory(obs_space, act_space, dict(model_config))
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"config key 'model': {getattr(factory, '__qualname__', factory)!r} must return a "
                         f"torch.nn.Module, got {type(module).__name__}")
    return module


class StackedModules(stacked.StackedModules):
    """Every member's copy of a user's PPO module, stacked (see the module docstring)."""

    def __init__(self, factory: Callable[..., Any], model_config: Mapping[str, Any], obs_space: gym.Space,
                 act_space: gym.Space, seeds: Sequence[int], device: str = "cpu") -> None:
        self.factory, self.model_config = factory, dict(model_config)
        self.obs_space, self.act_space = obs_space, act_space
        super().__init__([build_member(factory, model_config, obs_space, act_space, seed) for seed in seeds], device)

    # -- the population's interface (algorithms/ppo/population.py: PopulationNetworks) -------------
    def initialise(self, m: int, seed: int) -> None:
        """Member ``m``'s module drawn anew from ``seed``."""
        self.take(m, build_member(self.factory, self.model_config, self.obs_space, self.act_space, seed))

    def outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits ``[P, B, A]`` and values ``[P, B]`` for ``obs`` ``[P, B, obs_dim]``."""
        import torch

        with torch.no_grad():
            obs_t = torch.from_numpy(np.asarray(obs, dtype=F32)).to(self.device)
            logits, values = self._forward(self.theta, obs_t, self.acting_buffers())
        return logits.cpu().numpy(), values.cpu().numpy()

    def loss_gradient(self, mb: Mapping[str, np.ndarray], adv: np.ndarray, weight: np.ndarray,
                      coeffs: Mapping[str, np.ndarray], grad: torch.Tensor) -> dict[str, np.ndarray]:
        """Every member's PPO loss on its minibatch (as ``PackedNetworks.loss_gradient``), its
        gradient by autograd into ``grad`` ``[P, D]`` (of :meth:`gradient_buffer`), on the
        stack's device."""
        import torch

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

        theta = self.theta.detach().requires_grad_()
        logits, values = self._forward(theta, t(mb["obs"]), self._buffers)
        logp_all = torch.log_softmax(logits, dim=-1)
        log_ratio = logp_all.gather(-1, t(mb["actions"])[..., None])[..., 0] - t(mb["logp"])
        ratio = log_ratio.exp()
        adv_t, w, clip = t(adv), t(weight), t(coeffs["clip_param"])
        unclipped = adv_t * ratio
        clipped = adv_t * torch.clamp(ratio, 1 - clip, 1 + clip)
        policy_loss = -(torch.minimum(unclipped, clipped) * w).sum(1)
        diff = values - t(mb["returns"])
        vf_loss = 0.5 * (diff * diff * w).sum(1)
        entropy = -((logp_all.exp() * logp_all).sum(-1) * w).sum(1)
        loss = policy_loss + t(coeffs["vf_loss_coeff"])[:, 0] * vf_loss - t(coeffs["entropy_coeff"])[:, 0] * entropy
        loss.sum().backward()
        grad.copy_(theta.grad)  # type: ignore[arg-type]
        stats = {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, "ratio": ratio,
                 "log_ratio": log_ratio}
        return {key: value.detach().cpu().numpy() for key, value in stats.items()}

    def _forward(self, theta: torch.Tensor, obs: torch.Tensor,
                 buffers: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Every member's ``(dist_inputs [P, B, A], values [P, B])``."""
        dist_inputs, values = self.call(theta, buffers, obs)
        return dist_inputs, values.reshape(values.shape[0], obs.shape[1])


_checked: dict[tuple[str, ...], str | None] = {}


def stack_check(factory: Callable[..., Any], model_config: Mapping[str, Any], obs_space: gym.Space,
                act_space: gym.Space, key: str) -> str | None:
    """None when ``factory``'s module stacks (see the module docstring), else why not, in one line.
    Tried once per ``key`` (the factory's definition) and spaces in this process: two copies,
    their outputs on a batch of ``obs_space`` and a loss's gradient through them."""
    memo = (key, repr(dict(model_config)), repr(obs_space), repr(act_space))
    if memo not in _checked:
        _checked[memo] = _try_stack(factory, model_config, obs_space, act_space)
    return _checked[memo]


def _try_stack(factory: Callable[..., Any], model_config: Mapping[str, Any], obs_space: gym.Space,
               act_space: gym.Space) -> str | None:
    P, B, A = 2, 4, int(act_space.n)  # type: ignore[attr-defined]  # Discrete: pack_signature checked it
    try:
        nets = StackedModules(factory, model_config, obs_space, act_space, seeds=[0, 1])
        obs = np.stack([np.stack([obs_space.sample() for _ in range(B)]) for _ in range(P)]).astype(F32)
        logits, values = nets.outputs(obs)
        if logits.shape != (P, B, A):
            return (f"its forward gives dist_inputs of shape {logits.shape[1:]} for a batch of {B}, not ({B}, {A}) "
                    f"(logits of Discrete({A}))")
        column = np.ones((P, 1), dtype=F32)
        mb: dict[str, np.ndarray] = {"obs": obs, "actions": np.zeros((P, B), dtype=np.int64), "logp": np.zeros((P, B), dtype=F32),
              "returns": np.zeros((P, B), dtype=F32)}
        nets.loss_gradient(mb, np.ones((P, B), dtype=F32), np.full((P, B), 1 / B, dtype=F32),
                           {"clip_param": column, "vf_loss_coeff": column, "entropy_coeff": column},
                           nets.gradient_buffer())
    except Exception as error:  # noqa: BLE001 - any failure of a user's module means it does not stack
        first = (str(error).strip().splitlines() or [""])[0]
        return f"its module does not stack under torch.func.vmap ({type(error).__name__}: {first})"
    return None
