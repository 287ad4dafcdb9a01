"""The environments people bring, with their usual preprocessing through config, and the
observation spaces a trainer can take.

The trainers' ``preprocessing`` key (``COMMON_DEFAULTS`` in ``algorithms/core/common_config.py``):

* ``"auto"`` (the default): an Atari id (``ALE/Pong-v5``, ``PongNoFrameskip-v4``: any id ale-py
  registers) gets gymnasium's ``AtariPreprocessing`` with the Nature DQN settings (the env's own
  ``frameskip=1``, 4 frames skipped with max-pooling, up to 30 no-ops at reset, 84x84 grayscale
  uint8 frames, no terminal on life loss) and ``FrameStackObservation`` of 4 frames: a
  ``Box(0, 255, (4, 84, 84), uint8)``. A MiniGrid id (``MiniGrid-...``, ``BabyAI-...``) keeps its
  Dict observation without ``mission`` (a text space no trainer takes): ``image`` (uint8) and
  ``direction``. Every other env is left as it is.
* ``None`` or ``"none"``: the env as gymnasium makes it.
* a dict: options over the defaults of the env's family (``ATARI_DEFAULTS``, ``MINIGRID_DEFAULTS``).

Atari and MiniGrid ids are registered with gymnasium when a trainer resolves them
(``ensure_registered``), not when ``algorithms`` is imported: importing minigrid imports pygame.
The trainer's env then becomes ``functools.partial(make_env, ...)``: picklable, so rollout actors,
the vector env and the ``num_workers="auto"`` timing all build the same wrapped env.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np

from algorithms.data.observations import check_supported

logger = logging.getLogger(__name__)

EnvCreator = Callable[[Mapping[str, Any]], gym.Env]

#: The Nature DQN preprocessing of Atari frames (Mnih et al. 2015; SB3's AtariWrapper, CleanRL's).
ATARI_DEFAULTS: dict[str, Any] = {
    "frame_skip": 4,  # frames per agent step (max-pooled over the last two); the env's own frameskip is set to 1
    "frame_stack": 4,  # the last this many frames form the observation (1: no stacking)
    "screen_size": 84,  # frames resized to screen_size x screen_size
    "grayscale": True,
    "noop_max": 30,  # up to this many no-op actions at reset
    "terminal_on_life_loss": False,
}
#: MiniGrid's observations: "dict" keeps image and direction (mission dropped); "image": the image alone.
MINIGRID_DEFAULTS: dict[str, Any] = {
    "observation": "dict",
    "fully_observable": False,  # minigrid's FullyObsWrapper: the whole grid instead of the agent's view
    # MiniGrid's image holds codes (object 0-10, colour 0-5, state 0-2), not pixels: multiplied by
    # this they span uint8's range as pixels do, so the built-in CNN's /255 keeps them apart
    # (1: the codes as they are, which /255 squeezes below 0.04, and PPO then does not learn DoorKey)
    "image_scale": 25,
}
_FAMILIES: dict[str, dict[str, Any]] = {"atari": ATARI_DEFAULTS, "minigrid": MINIGRID_DEFAULTS}
#: Packages that register gymnasium ids when imported, by how their ids start.
_PLUGINS: tuple[tuple[str, str], ...] = (("ALE/", "ale_py"), ("MiniGrid-", "minigrid"), ("BabyAI-", "minigrid"))
#: Observation spaces the trainers take (alone, or as the values of a Dict or Tuple).
_PREPROCESSING_TEXT = (
    f"must be 'auto', None, 'none' or a dict of options (Atari: {sorted(ATARI_DEFAULTS)}; "
    f"MiniGrid: {sorted(MINIGRID_DEFAULTS)})"
)


def _fail(message: str, value: Any) -> None:
    raise ValueError(f"config key 'preprocessing': {message}, got {value!r}")


def check_preprocessing(value: Any) -> None:
    """Raise ValueError naming ``preprocessing`` unless ``value`` is one of its forms (see the module's doc)."""
    if value is None or (isinstance(value, str) and value in ("auto", "none")):
        return
    if not isinstance(value, Mapping):
        _fail(_PREPROCESSING_TEXT, value)
    for key, option in value.items():
        if key not in ATARI_DEFAULTS and key not in MINIGRID_DEFAULTS:
            _fail(f"unknown option {key!r}; " + _PREPROCESSING_TEXT, value)
        if key in ("frame_skip", "frame_stack", "screen_size"):
            ok = isinstance(option, int) and not isinstance(option, bool) and option >= 1
            expected = "an int >= 1"
        elif key == "image_scale":
            ok = isinstance(option, int) and not isinstance(option, bool) and 1 <= option <= 25
            expected = "an int from 1 to 25 (MiniGrid's codes reach 10: 25 x 10 = 250 still fits uint8)"
        elif key == "noop_max":
            ok = isinstance(option, int) and not isinstance(option, bool) and option >= 0
            expected = "an int >= 0"
        elif key == "observation":
            ok, expected = option in ("dict", "image"), "'dict' or 'image'"
        else:
            ok, expected = isinstance(option, bool), "True or False"
        if not ok:
            _fail(f"option {key!r} must be {expected}", value)


def ensure_registered(env_id: str) -> None:
    """Import the package that registers ``env_id`` with gymnasium (ale_py for Atari ids, minigrid
    for MiniGrid's), if gymnasium does not know the id yet and the package is installed."""
    if env_id in gym.registry:
        return
    module = next((name for prefix, name in _PLUGINS if env_id.startswith(prefix)), None)
    if module is None and env_id.endswith(("-v0", "-v4")):
        module = "ale_py"  # Atari's older ids (PongNoFrameskip-v4, Breakout-v0) have no namespace
    if module is None:
        return
    try:
        plugin = importlib.import_module(module)
    except ImportError:
        return  # gymnasium's own error then says the id is unknown
    gym.register_envs(plugin)


#: The simulators whose start-up chatter this process has quieted (see :func:`quiet_simulator`).
_QUIETED: set[str] = set()


def quiet_simulator(env_id: str) -> None:
    """Keep a simulator's start-up chatter out of a sweep's output, once per process: ALE's
    banner (its logger set to errors only) and MuJoCo's deprecation notices about the models
    gymnasium bundles (logged at debug level); any other MuJoCo warning is still printed."""
    ensure_registered(env_id)
    try:
        entry = gym.spec(env_id).entry_point
    except gym.error.Error:
        return  # gymnasium's own error comes when the env is made
    module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    if module.startswith("ale_py") and "ale" not in _QUIETED:
        import ale_py

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        _QUIETED.add("ale")
    elif module.startswith("gymnasium.envs.mujoco") and "mujoco" not in _QUIETED:
        import mujoco

        mujoco.set_mju_user_warning(_mujoco_warning)
        _QUIETED.add("mujoco")


def _mujoco_warning(message: str) -> None:
    if "deprecated" in message:
        logger.debug("MuJoCo: %s", message)
        return
    print(f"WARNING: {message}", file=sys.stderr, flush=True)  # as MuJoCo's own handler says it


def env_family(env_id: str) -> str | None:
    """"atari", "minigrid" or None for a gymnasium id (from the package its entry point is in)."""
    ensure_registered(env_id)
    entry = gym.spec(env_id).entry_point
    module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    if module.startswith("ale_py"):
        return "atari"
    if module.startswith("minigrid"):
        return "minigrid"
    return None


def env_creator(env_id: str, env_config: Mapping[str, Any], preprocessing: Any) -> EnvCreator | None:
    """The creator ``env_config -> gym.Env`` of ``env_id`` with ``preprocessing`` applied, or None
    where ``env_id`` is neither an Atari nor a MiniGrid id (a dict of options for one is an error).

    Atari and MiniGrid ids always get a creator, also with ``preprocessing=None``: it registers the
    id in whichever process builds the env (a rollout actor), and it keeps ale-py's own vector env
    (which preprocesses frames its own way) out of the trainer's."""
    check_preprocessing(preprocessing)
    family = env_family(env_id)
    if family is None:
        if isinstance(preprocessing, Mapping):
            _fail(f"options apply to Atari and MiniGrid ids, and env {env_id!r} is neither", preprocessing)
        return None
    options: dict[str, Any] | None = None
    if preprocessing is not None and preprocessing != "none":
        given = dict(preprocessing) if isinstance(preprocessing, Mapping) else {}
        foreign = sorted(set(given) - set(_FAMILIES[family]))
        if foreign:
            _fail(f"options {foreign} do not apply to {family} env {env_id!r} (its options: "
                  f"{sorted(_FAMILIES[family])})", preprocessing)
        options = {**_FAMILIES[family], **given}
        if family == "atari" and options["frame_skip"] > 1 and env_config.get("frameskip", 1) != 1:
            raise ValueError(
                f"config key 'env_config': frameskip={env_config['frameskip']!r} with preprocessing's frame_skip="
                f"{options['frame_skip']}: skip frames in one place (frameskip 1, or preprocessing frame_skip 1)")
    return functools.partial(make_env, env_id, family, options)


def make_env(env_id: str, family: str, options: Mapping[str, Any] | None, env_config: Mapping[str, Any]) -> gym.Env:
    """``env_id`` made with ``env_config`` and wrapped per ``options`` (None: unwrapped); what
    :func:`env_creator`'s creators call."""
    quiet_simulator(env_id)
    config = dict(env_config)
    if options is None:
        return gym.make(env_id, **config)
    if family == "atari":
        from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

        if options["frame_skip"] > 1:
            config.setdefault("frameskip", 1)  # AtariPreprocessing skips the frames
        env: gym.Env = AtariPreprocessing(
            gym.make(env_id, **config), noop_max=options["noop_max"], frame_skip=options["frame_skip"],
            screen_size=options["screen_size"], terminal_on_life_loss=options["terminal_on_life_loss"],
            grayscale_obs=options["grayscale"], scale_obs=False,  # frames stay uint8
        )
        if options["frame_stack"] > 1:
            env = FrameStackObservation(env, options["frame_stack"])
        return env
    from gymnasium.wrappers import FilterObservation
    from minigrid.wrappers import FullyObsWrapper, ImgObsWrapper

    env = gym.make(env_id, **config)
    if options["fully_observable"]:
        env = FullyObsWrapper(env)
    if options["image_scale"] != 1:
        env = _ScaledImage(env, options["image_scale"])
    if options["observation"] == "image":
        return ImgObsWrapper(env)
    assert isinstance(env.observation_space, gym.spaces.Dict)  # MiniGrid's: image, direction, mission
    return FilterObservation(env, [key for key in env.observation_space.spaces if key != "mission"])


class _ScaledImage(gym.ObservationWrapper):
    """MiniGrid's image codes multiplied by ``scale`` (still uint8; see ``MINIGRID_DEFAULTS``)."""

    def __init__(self, env: gym.Env, scale: int) -> None:
        super().__init__(env)
        self.scale = np.uint8(scale)

    def observation(self, observation: Any) -> Any:
        return {**observation, "image": observation["image"] * self.scale}




def check_observation_space(space: gym.Space, env: Any = None) -> None:
    """Raise one ValueError naming ``env`` if no trainer can take ``space``: the supported spaces are
    Box (any shape and dtype), Discrete, MultiBinary, MultiDiscrete, and a Dict or Tuple of those."""
    hint = ""
    if isinstance(space, gym.spaces.Dict) and "mission" in space.spaces:
        hint = " (MiniGrid's mission is dropped by preprocessing='auto', the default)"
    check_supported(space, env, hint)
