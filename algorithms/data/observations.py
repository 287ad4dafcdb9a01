"""Observations as the env gives them, and as a network takes them.

A fragment keeps each observation in the env's own dtype and structure (``Obs``: an array, or a
dict / tuple of them, with leading batch axes), so a uint8 image stays one byte a pixel through
fragments, Ray's transport, train batches and the replay buffer. It becomes float only where a
network reads it: :meth:`ObsSpace.flat_numpy` for the numpy policies (the built-in MLPs' rollout
side), :meth:`ObsSpace.flat_torch` and :meth:`ObsSpace.model_input` on the learner's device.

Spaces taken: ``Box`` (any shape and dtype), ``Discrete``, ``MultiBinary``, ``MultiDiscrete``,
and ``Dict`` / ``Tuple`` of those. Flattened, a Box is its values, a Discrete (and each
sub-action of a MultiDiscrete) a one-hot vector, a MultiBinary its bits, a Dict its keys in
the space's order (gymnasium sorts them) and a Tuple its items, concatenated.

    >>> import gymnasium as gym, numpy as np
    >>> space = ObsSpace(gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "door": gym.spaces.Discrete(3)}))
    >>> space.flat_dim
    5
    >>> space.flat_numpy({"pos": np.zeros((1, 2), np.float32), "door": np.array([2])}).tolist()
    [[0.0, 0.0, 1.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:
    import torch

#: An observation batch: an array with leading batch axes, or a dict / tuple of them.
Obs = Union[np.ndarray, dict[str, "Obs"], tuple["Obs", ...]]

SUPPORTED = "Box, Discrete, MultiBinary, MultiDiscrete, and Dict or Tuple of those"


def check_supported(space: gym.Space, env: Any = None, hint: str = "") -> None:
    """Raise one ValueError naming ``env`` (the config key, and the env when given) when no
    trainer can take the observation space; ``hint`` follows the message."""
    bad = _unsupported(space, "")
    if bad is None:
        return
    where, part = bad
    whose = f", whose {where} is {type(part).__name__}," if where else ""
    named = "" if env is None else f" of {env!r}"
    raise ValueError(f"config key 'env': the observation space {space}{named}{whose} is not supported; "
                     f"supported: {SUPPORTED}{hint}")


def _unsupported(space: gym.Space, where: str) -> tuple[str, gym.Space] | None:
    """(where in ``space``, the part) that no trainer takes, else None."""
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary)):
        return None
    if isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return None
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        named = "key" if isinstance(space, gym.spaces.Dict) else "item"
        for key, sub in _children(space):
            bad = _unsupported(sub, f"{where}{named} {key!r}" if not where else f"{where}, {named} {key!r}")
            if bad is not None:
                return bad
        return None
    return where, space


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """``fn`` applied leaf by leaf to one observation tree (or several of the same structure)."""
    if isinstance(tree, dict):
        return {key: tree_map(fn, tree[key], *(r[key] for r in rest)) for key in tree}
    if isinstance(tree, tuple):
        return tuple(tree_map(fn, item, *(r[i] for r in rest)) for i, item in enumerate(tree))
    return fn(tree, *rest)


def leaves(tree: Any) -> list[Any]:
    """The arrays of an observation tree, in its order."""
    if isinstance(tree, dict):
        return [leaf for key in tree for leaf in leaves(tree[key])]
    if isinstance(tree, tuple):
        return [leaf for item in tree for leaf in leaves(item)]
    return [tree]


def batch_size(tree: Any) -> int:
    """The leading dimension of an observation batch."""
    return int(leaves(tree)[0].shape[0])


def nbytes(tree: Any) -> int:
    """Bytes held by an observation tree's arrays."""
    return sum(int(np.asarray(leaf).nbytes) for leaf in leaves(tree))


def is_image(space: gym.Space) -> bool:
    """A Box of 3 dimensions (height, width, channels or channels first): what a CNN takes."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def has_image(space: gym.Space) -> bool:
    """Whether the space is, or holds, an image Box."""
    if isinstance(space, gym.spaces.Dict):
        return any(has_image(sub) for sub in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return any(has_image(sub) for sub in space.spaces)
    return is_image(space)


class ObsSpace:
    """One observation space: how its batches are stored, flattened and handed to a network."""

    def __init__(self, space: gym.Space) -> None:
        check_supported(space)
        self.space = space
        #: Observations come as (batch, dim) float32 already: flattening them is a no-op (CartPole...).
        self.identity = isinstance(space, gym.spaces.Box) and space.dtype == np.float32 and len(space.shape) == 1
        self.flat_dim = int(gym.spaces.flatdim(space)) if not isinstance(space, gym.spaces.Box) else int(np.prod(space.shape))

    # -- storage ----------------------------------------------------------------------------------
    def stored(self, obs: Any) -> Obs:
        """A batch as a fragment keeps it: the env's dtype, a copy the env cannot overwrite."""
        return _stored(self.space, obs)

    def empty(self, lead: tuple[int, ...]) -> Obs:
        """Buffers for batches of shape ``lead`` (e.g. (T, num_envs)), in the stored dtypes."""
        return _empty(self.space, lead)

    # -- as a network takes it ------------------------------------------------------------------------
    def flat_numpy(self, obs: Obs) -> np.ndarray:
        """(batch, flat_dim) float32, for the numpy networks."""
        if self.identity:
            return np.asarray(obs)
        return np.concatenate(_flat_parts_numpy(self.space, obs), axis=1) if _is_composite(self.space) \
            else _flat_parts_numpy(self.space, obs)[0]

    def flat_torch(self, obs: Any) -> torch.Tensor:
        """(batch, flat_dim) float32 tensor of a batch of tensors (on any device)."""
        import torch

        parts = _flat_parts_torch(self.space, obs)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def model_input(self, obs: Any) -> Any:
        """What a model's ``forward`` gets: the tree as float32 tensors, a Discrete one-hot, a
        MultiDiscrete its one-hots concatenated, images as they are (uint8 values as floats)."""
        return _model_input(self.space, obs)


def _is_composite(space: gym.Space) -> bool:
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def _children(space: gym.Space) -> list[tuple[Any, gym.Space]]:
    if isinstance(space, gym.spaces.Dict):
        return list(space.spaces.items())
    assert isinstance(space, gym.spaces.Tuple)
    return list(enumerate(space.spaces))


def _stored(space: gym.Space, obs: Any) -> Obs:
    if isinstance(space, gym.spaces.Dict):
        return {key: _stored(sub, obs[key]) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_stored(sub, obs[i]) for i, sub in enumerate(space.spaces))
    return np.array(obs, dtype=_dtype(space))


def _dtype(space: gym.Space) -> np.dtype:
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return np.dtype(np.int64)
    return np.dtype(space.dtype)


def _empty(space: gym.Space, lead: tuple[int, ...]) -> Obs:
    if isinstance(space, gym.spaces.Dict):
        return {key: _empty(sub, lead) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_empty(sub, lead) for sub in space.spaces)
    shape = () if isinstance(space, gym.spaces.Discrete) else tuple(space.shape or ())
    return np.empty(lead + shape, dtype=_dtype(space))


def _flat_parts_numpy(space: gym.Space, obs: Any) -> list[np.ndarray]:
    if _is_composite(space):
        return [part for key, sub in _children(space) for part in _flat_parts_numpy(sub, obs[key])]
    obs = np.asarray(obs)
    n = len(obs)
    if isinstance(space, gym.spaces.Discrete):
        out = np.zeros((n, int(space.n)), dtype=np.float32)
        out[np.arange(n), obs.astype(np.int64) - int(space.start)] = 1.0
        return [out]
    if isinstance(space, gym.spaces.MultiDiscrete):
        columns = obs.astype(np.int64) - np.asarray(space.start, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(space.nvec)[:-1]]).astype(np.int64)
        out = np.zeros((n, int(space.nvec.sum())), dtype=np.float32)
        out[np.arange(n)[:, None], columns + offsets] = 1.0
        return [out]
    return [obs.reshape(n, -1).astype(np.float32, copy=False)]


def _flat_parts_torch(space: gym.Space, obs: Any) -> list[torch.Tensor]:
    import torch

    if _is_composite(space):
        return [part for key, sub in _children(space) for part in _flat_parts_torch(sub, obs[key])]
    n = obs.shape[0]
    if isinstance(space, gym.spaces.Discrete):
        return [torch.nn.functional.one_hot(obs.long() - int(space.start), int(space.n)).float()]
    if isinstance(space, gym.spaces.MultiDiscrete):
        starts = torch.as_tensor(np.asarray(space.start, dtype=np.int64), device=obs.device)
        return [torch.nn.functional.one_hot(column, int(k)).float()
                for column, k in zip((obs.long() - starts).unbind(1), space.nvec)]
    return [obs.reshape(n, -1).float()]


def _model_input(space: gym.Space, obs: Any) -> Any:
    import torch

    if isinstance(space, gym.spaces.Dict):
        return {key: _model_input(sub, obs[key]) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_model_input(sub, obs[i]) for i, sub in enumerate(space.spaces))
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        parts = _flat_parts_torch(space, obs)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    return obs.float()


def flat_input(obs: Any) -> torch.Tensor:
    """A model input (see :meth:`ObsSpace.model_input`) as one (batch, features) float tensor:
    its leaves flattened and concatenated, in the tree's order."""
    import torch

    parts = [leaf.reshape(leaf.shape[0], -1) for leaf in leaves(obs)]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def batch_of(space: gym.Space, samples: list[Any]) -> Obs:
    """Single observations of ``space`` (``space.sample()``'s) as one batch."""
    return stack([_stored(space, sample) for sample in samples])


def to_tensors(obs: Obs, device: Any) -> Any:
    """An observation tree as tensors on ``device``, dtypes kept (a copy: Ray hands out read-only arrays)."""
    import torch

    return tree_map(lambda leaf: torch.from_numpy(np.array(leaf)).to(device), obs)


def index(obs: Obs, rows: Any) -> Obs:
    """``obs[rows]`` leaf by leaf (numpy arrays or tensors)."""
    return tree_map(lambda leaf: leaf[rows], obs)


def flatten_lead(obs: Obs, lead: int = 2) -> Obs:
    """The first ``lead`` axes of every leaf as one (e.g. (T, N, ...) -> (T * N, ...))."""
    return tree_map(lambda leaf: leaf.reshape((-1,) + leaf.shape[lead:]), obs)


def concat(trees: list[Obs]) -> Obs:
    """Batches of one structure, one after the other (along the first axis)."""
    return tree_map(lambda *parts: np.concatenate(parts), trees[0], *trees[1:])


def stack(trees: list[Obs]) -> Obs:
    """Batches of one structure, stacked on a new first axis."""
    return tree_map(lambda *parts: np.stack(parts), trees[0], *trees[1:])
