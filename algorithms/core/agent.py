"""A trained agent out of a checkpoint: what a trainer's checkpoint says of its config, and the
episodes a loaded agent plays.

A trainer's checkpoint holds its weights and state (``trainer_state.pt``, tensors and plain data)
and, beside them, ``agent.json``: the algorithm and the config the trial was given, as JSON. A
callable in the config (a model builder, an env creator) is kept as ``module:qualname`` and
imported again on load; one that cannot be named so (a lambda, a function defined inside
another) is left out, and loading then asks for it (``config=`` overrides). An env name given
to ``register_env`` must be registered again in the loading process, as in RLlib.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from algorithms.core.names import trainer_class
from tuner.trainable.checkpoint import atomic_file

__all__ = ["AGENT_FILE", "AGENT_LAYOUT", "Episode", "load_trainer", "make_single_env", "play", "read_agent_file",
           "write_agent_file"]

AGENT_FILE = "agent.json"
_CALLABLE = "__callable__"
#: How a loaded agent samples: in its own process, one env, on the CPU (a machine that never ran it).
AGENT_LAYOUT = {"num_workers": 0, "num_envs_per_worker": 1, "env_threads": False, "num_gpus_for_learner": 0,
                "evaluation_num_workers": 0}


def write_agent_file(checkpoint_dir: str, algorithm: str, config: Mapping[str, Any]) -> None:
    """Write ``agent.json`` into ``checkpoint_dir``: the algorithm and its (given) config."""
    left_out: list[str] = []
    encoded = _encode(dict(config), "", left_out)
    with atomic_file(os.path.join(checkpoint_dir, AGENT_FILE), "w") as f:
        json.dump({"format": 1, "algorithm": algorithm, "config": encoded, "left_out": left_out}, f)


def read_agent_file(checkpoint_dir: str) -> tuple[str, dict[str, Any], list[str]]:
    """(algorithm, config, the config keys that could not be kept) from ``agent.json``; a folder
    without it is a ValueError saying what it is not."""
    path = os.path.join(checkpoint_dir, AGENT_FILE)
    if not os.path.exists(path):
        raise ValueError(f"{checkpoint_dir} is not a checkpoint of one of our trainers: "
                         f"it holds no {AGENT_FILE}")
    with open(path) as f:
        data = json.load(f)
    return str(data["algorithm"]), _decode(data["config"]), list(data.get("left_out", []))


def _encode(value: Any, path: str, left_out: list[str]) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _encode(v, f"{path}.{k}" if path else str(k), left_out) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, f"{path}[{i}]", left_out) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if callable(value):
        name = _importable_name(value)
        if name is not None:
            return {_CALLABLE: name}
    left_out.append(path)
    return None


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_CALLABLE}:
            module, _, qualname = str(value[_CALLABLE]).partition(":")
            target: Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
            return target
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _importable_name(fn: Any) -> str | None:
    """``module:qualname`` that imports ``fn`` again, or None (a lambda, a local function)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    try:
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if target is fn else None


def load_trainer(checkpoint: str, config: Mapping[str, Any] | None = None, expected: str | None = None) -> Any:
    """The trainer ``checkpoint`` (a folder or an object store's URI) was saved from, built with
    the config it was given (``config`` on top, :data:`AGENT_LAYOUT` under it) and restored."""
    with _local_folder(checkpoint) as local:
        algorithm, saved, left_out = read_agent_file(local)
        if expected is not None and algorithm != expected:
            raise ValueError(f"{checkpoint} is a checkpoint of {algorithm}, not of {expected}: load it with "
                             f"algorithms.{algorithm}.from_checkpoint or algorithms.load_agent")
        given = dict(config or {})
        missing = [key for key in left_out if key.split(".")[0].split("[")[0] not in given]
        if missing:
            raise ValueError(f"the checkpoint {checkpoint} could not keep config key(s) {missing} (a lambda or a "
                             f"function defined inside another): give them, e.g. load_agent(path, config={{"
                             f"{missing[0].split('.')[0]!r}: ...}})")
        trainer = trainer_class(algorithm)(config={**saved, **AGENT_LAYOUT, **given})
        trainer.restore(local)
    return trainer


class _local_folder:
    """A local folder holding ``checkpoint``: itself, or a temporary download of a URI."""

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = str(checkpoint)
        self._tmp: str | None = None

    def __enter__(self) -> str:
        from tuner.storage import is_uri

        if not is_uri(self.checkpoint):
            if not os.path.isdir(self.checkpoint):
                raise FileNotFoundError(f"no checkpoint folder at {self.checkpoint}")
            return self.checkpoint
        import tempfile

        from tuner.storage.checkpoints import storage_of

        self._tmp = tempfile.mkdtemp(prefix="tuner_agent_")
        storage_of(self.checkpoint).download(self.checkpoint, self._tmp)
        return self._tmp

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            import shutil

            shutil.rmtree(self._tmp, ignore_errors=True)


def make_single_env(env: Any, env_config: Mapping[str, Any], render_mode: str | None = None) -> Any:
    """One env of a trainer's resolved ``env`` (a gymnasium id or a creator) and ``env_config``;
    ``render_mode`` asks it for frames (a preset's creator passes it to gymnasium)."""
    import gymnasium as gym

    from algorithms.envs.presets import quiet_simulator
    from algorithms.envs.registry import EnvContext

    config: dict[str, Any] = dict(env_config)
    if render_mode:
        config.setdefault("render_mode", render_mode)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames off screen: pygame's envs want no display
    if isinstance(env, str):
        quiet_simulator(env)
        return gym.make(env, **config)
    return env(EnvContext(config, 0, 0))


# -- playing episodes --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Episode:
    """One episode an agent played: its return, its length, the env seed it began from."""

    seed: int
    episode_return: float
    length: int


def play(agent: Any, env: Any, episodes: int, seed: int, *, explore: bool = False,
         video_dir: str | None = None, fps: int | None = None) -> list[Episode]:
    """Play ``episodes`` episodes of ``env`` (a gymnasium env) with ``agent.act``, the i-th from
    env seed ``seed + i``; with ``video_dir`` each episode's frames go to an mp4 there
    (``episode_<i>.mp4``; the env must render ``rgb_array`` frames)."""
    if episodes < 1:
        raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
    if video_dir is not None:
        Path(video_dir).mkdir(parents=True, exist_ok=True)
        fps = fps or int(getattr(env, "metadata", {}).get("render_fps") or 30)
    played = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        frames = [_frame(env)] if video_dir is not None else None
        total, length, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.act(obs, explore=explore))
            total += float(reward)
            length += 1
            done = bool(terminated or truncated)
            if frames is not None:
                frames.append(_frame(env))
        if frames is not None and video_dir is not None:
            _write_video(os.path.join(video_dir, f"episode_{i}.mp4"), frames, fps or 30)
        played.append(Episode(seed + i, total, length))
    return played


def _frame(env: Any) -> np.ndarray:
    try:
        frame = env.render()
    except NotImplementedError:  # gymnasium's Env.render when the env has none
        frame = None
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise ValueError(f"env {getattr(env, 'spec', None) and env.spec.id or type(env).__name__} cannot render "
                         f"frames (render_mode 'rgb_array' gave {type(frame).__name__}): no video")
    return frame


def _write_video(path: str, frames: list[np.ndarray], fps: int) -> None:
    import imageio.v2 as imageio

    # macro_block_size 1: frames of any size (ffmpeg's default would resize them to multiples of 16)
    writer: Any = imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=1)
    with writer:
        for frame in frames:
            writer.append_data(frame)
