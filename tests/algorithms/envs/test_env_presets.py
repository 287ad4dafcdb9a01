"""The environments people bring (Atari, MiniGrid, MuJoCo) through the trainers' config: the
``preprocessing`` key, the spaces the driver checks, and creators that travel to rollout actors.
No training here: each env is built and stepped a few times."""

from __future__ import annotations

import pickle
import subprocess
import sys
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

from algorithms.ppo import PPO
from algorithms.envs import presets as env_presets
from algorithms.envs.registry import make_vector_env
from algorithms.core.common_config import COMMON_DEFAULTS


def step_a_few(env: Any, steps: int = 3) -> Any:
    """Reset and step a vector env of 2 copies of ``env`` with random actions; the last observations."""
    envs = make_vector_env(env, {}, 2)
    try:
        obs, _ = envs.reset(seed=0)
        envs.action_space.seed(0)
        for _ in range(steps):
            obs, *_ = envs.step(envs.action_space.sample())
        return obs
    finally:
        envs.close()


def test_atari_gets_the_nature_frames_by_default():
    assert COMMON_DEFAULTS["preprocessing"] == "auto"
    trial = PPO.prepare_trial({"env": "ALE/Pong-v5"})
    assert trial.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert trial.action_space == gym.spaces.Discrete(6)
    obs = step_a_few(trial.env)
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8


def test_atari_options_override_the_defaults_on_an_old_style_id():
    trial = PPO.prepare_trial({"env": "PongNoFrameskip-v4", "preprocessing": {"frame_stack": 2, "screen_size": 64}})
    assert trial.observation_space == gym.spaces.Box(0, 255, (2, 64, 64), np.uint8)
    assert step_a_few(trial.env, steps=1).shape == (2, 2, 64, 64)


@pytest.mark.parametrize("preprocessing", [None, "none"])
def test_no_preprocessing_leaves_atari_frames_raw(preprocessing):
    trial = PPO.prepare_trial({"env": "ALE/Pong-v5", "preprocessing": preprocessing})
    assert trial.observation_space == gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    obs = step_a_few(trial.env, steps=1)
    assert obs.shape == (2, 210, 160, 3) and obs.dtype == np.uint8


def test_minigrid_keeps_image_and_direction_and_drops_the_mission():
    trial = PPO.prepare_trial({"env": "MiniGrid-DoorKey-5x5-v0"})
    space = trial.observation_space
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"image", "direction"}
    assert space["image"] == gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
    assert space["direction"] == gym.spaces.Discrete(4)
    # one env, not a vector env: batching Dict observations is the observation pipeline's business
    env = trial.env({})
    env.reset(seed=0)
    obs, *_ = env.step(env.action_space.sample())
    env.close()
    assert set(obs) == {"image", "direction"}
    assert obs["image"].shape == (7, 7, 3) and obs["image"].dtype == np.uint8


@pytest.mark.parametrize("scale", [25, 1])
def test_minigrid_image_codes_span_the_uint8_range_unless_asked_not_to(scale):
    preprocessing = "auto" if scale == 25 else {"image_scale": 1}
    env = PPO.prepare_trial({"env": "MiniGrid-DoorKey-5x5-v0", "preprocessing": preprocessing}).env({})
    raw = gym.make("MiniGrid-DoorKey-5x5-v0")
    try:
        obs, _ = env.reset(seed=3)
        codes, _ = raw.reset(seed=3)  # the same grid, MiniGrid's own codes
    finally:
        env.close()
        raw.close()
    assert obs["image"].dtype == np.uint8 and 0 < codes["image"].max() <= 10  # codes, not pixels
    np.testing.assert_array_equal(obs["image"], codes["image"] * scale)


def test_minigrid_image_alone_on_request():
    trial = PPO.prepare_trial({"env": "MiniGrid-DoorKey-5x5-v0", "preprocessing": {"observation": "image"}})
    assert trial.observation_space == gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)


@pytest.mark.parametrize("env_id, obs_dim, act_dim", [("HalfCheetah-v5", 17, 6), ("Hopper-v5", 11, 3)])
def test_mujoco_envs_build_and_step(env_id, obs_dim, act_dim):
    trial = PPO.prepare_trial({"env": env_id})
    assert trial.env == env_id  # nothing to preprocess: the gymnasium id as it is
    assert trial.observation_space.shape == (obs_dim,) and trial.action_space.shape == (act_dim,)
    obs = step_a_few(trial.env)
    assert obs.shape == (2, obs_dim) and np.isfinite(obs).all()


@pytest.mark.parametrize("env, preprocessing, says", [
    ("ALE/Pong-v5", "yes", "must be 'auto', None, 'none' or a dict of options"),
    ("ALE/Pong-v5", 4, "must be 'auto', None, 'none' or a dict of options"),
    ("ALE/Pong-v5", {"colour": True}, "unknown option 'colour'"),
    ("ALE/Pong-v5", {"frame_skip": 0}, "option 'frame_skip' must be an int >= 1"),
    ("ALE/Pong-v5", {"grayscale": "yes"}, "option 'grayscale' must be True or False"),
    ("ALE/Pong-v5", {"observation": "image"}, "options ['observation'] do not apply to atari env"),
    ("MiniGrid-DoorKey-5x5-v0", {"observation": "rgb"}, "option 'observation' must be 'dict' or 'image'"),
    ("MiniGrid-DoorKey-5x5-v0", {"image_scale": 26}, "option 'image_scale' must be an int from 1 to 25"),
    ("CartPole-v1", {"frame_stack": 4}, "options apply to Atari and MiniGrid ids, and env 'CartPole-v1' is neither"),
])
def test_a_bad_preprocessing_is_one_error_naming_the_key(env, preprocessing, says):
    with pytest.raises(ValueError, match="config key 'preprocessing'") as error:
        PPO.prepare_trial({"env": env, "preprocessing": preprocessing})
    assert says in str(error.value)


class TextObservationEnv(gym.Env):
    """An env whose observations are strings: no trainer takes them."""

    observation_space = gym.spaces.Text(8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "hello", {}

    def step(self, action):
        return "world", 0.0, True, False, {}


def text_env(env_config):
    return TextObservationEnv()


def text_in_dict_env(env_config):
    env = TextObservationEnv()
    env.observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "note": gym.spaces.Text(8)})
    return env


@pytest.mark.parametrize("creator, part", [(text_env, ""), (text_in_dict_env, "whose key 'note' is Text")])
def test_an_observation_space_no_trainer_takes_is_one_error_naming_env(creator, part):
    with pytest.raises(ValueError, match="config key 'env'") as error:
        PPO.prepare_trial({"env": creator})
    message = str(error.value)
    assert "Text(" in message and part in message
    assert "supported: Box, Discrete, MultiBinary, MultiDiscrete, and Dict or Tuple of those" in message


def test_minigrid_without_preprocessing_says_how_to_drop_the_mission():
    with pytest.raises(ValueError, match="config key 'env'.*whose key 'mission' is MissionSpace.*preprocessing='auto'"):
        PPO.prepare_trial({"env": "MiniGrid-DoorKey-5x5-v0", "preprocessing": None})


def test_supported_spaces_pass_the_check():
    box = gym.spaces.Box(0, 255, (3, 4), np.uint8)
    for space in (box, gym.spaces.Discrete(3), gym.spaces.MultiBinary(4), gym.spaces.MultiDiscrete([2, 3]),
                  gym.spaces.Dict({"a": box, "b": gym.spaces.MultiBinary(2)}),
                  gym.spaces.Tuple([box, gym.spaces.Discrete(2)])):
        env_presets.check_observation_space(space)


def test_a_preprocessing_change_needs_a_new_trainer():
    assert "preprocessing" in PPO._rebuild_keys


def build_and_step(creator: Any) -> tuple[tuple[int, ...], str]:
    """Build ``creator``'s env in this process and step it once: the observation's shape and dtype."""
    env = creator({})
    env.reset(seed=0)
    obs, *_ = env.step(env.action_space.sample())
    env.close()
    return obs.shape, str(obs.dtype)


def test_the_preprocessing_creator_travels_to_a_rollout_actor(ray_session):
    creator = PPO.prepare_trial({"env": "ALE/Pong-v5"}).env
    assert callable(creator)
    copy = cloudpickle.loads(cloudpickle.dumps(creator))
    assert build_and_step(copy) == ((4, 84, 84), "uint8")
    pickle.dumps(creator)  # a partial of a module-level function: plain pickle takes it too
    # another process, which registers the Atari ids itself when it builds the env
    remote = ray_session.remote(build_and_step).options(num_cpus=0)
    assert ray_session.get(remote.remote(creator)) == ((4, 84, 84), "uint8")


def test_importing_algorithms_imports_no_env_package():
    """A rollout actor imports ``algorithms``: the env packages load when an id needs them."""
    code = ("import sys, algorithms; "
            "print(sorted(m for m in ('ale_py', 'minigrid', 'pygame', 'cv2', 'mujoco') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


_MAKE_ENVS = """
import sys
from algorithms.envs.registry import make_vector_env
for env_id in sys.argv[1:]:
    envs = make_vector_env(env_id, {}, 2)
    envs.reset(seed=0)
    envs.close()
print("made")
"""


def test_simulators_say_nothing_into_a_sweeps_output():
    """ALE's banner and MuJoCo's deprecation notices about gymnasium's bundled models (one per env
    made, in every rollout actor) stay out of what a sweep prints."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _MAKE_ENVS, "ALE/Pong-v5", "HalfCheetah-v5"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "made\n" and done.stderr == "", done.stdout + done.stderr
