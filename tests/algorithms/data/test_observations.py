"""Observation spaces: every space a trainer takes, through every trainer, in the env's dtype."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from algorithms import A2C, DQN, ES, IMPALA, PPO, SAC, TD3, register_env
from algorithms.data.observations import ObsSpace, batch_of, check_supported, to_tensors
from algorithms.sampling.rollout_worker import RolloutWorker

IMAGE = gym.spaces.Box(0, 255, (6, 5, 3), np.uint8)
SPACES = {
    "image": IMAGE,
    "box2d": gym.spaces.Box(-1.0, 1.0, (3, 2), np.float32),
    "discrete": gym.spaces.Discrete(5, start=2),
    "multibinary": gym.spaces.MultiBinary(4),
    "multidiscrete": gym.spaces.MultiDiscrete([3, 2, 4]),
    "dict": gym.spaces.Dict({"image": IMAGE, "direction": gym.spaces.Discrete(4),
                             "speed": gym.spaces.Box(-2.0, 2.0, (2,), np.float64)}),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(0.0, 1.0, (2,), np.float32))),
}
# every kind of space at once, nested: what the rollout-actor tests sample
SPACES["all"] = gym.spaces.Dict({"image": IMAGE, "grid": SPACES["box2d"], "door": SPACES["discrete"],
                                 "bits": SPACES["multibinary"], "keys": SPACES["multidiscrete"],
                                 "pair": SPACES["tuple"]})


class SpaceEnv(gym.Env):
    """Random observations of ``config["obs"]`` (a key of SPACES); reward 1 for action 0 (or a
    Box action near 0); episodes of 8 steps."""

    def __init__(self, config):
        self.observation_space = SPACES[config["obs"]]
        self.action_space = gym.spaces.Discrete(2) if config.get("actions", "discrete") == "discrete" \
            else gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self._t += 1
        good = action == 0 if isinstance(self.action_space, gym.spaces.Discrete) else abs(float(action[0])) < 0.5
        return self.observation_space.sample(), float(good), False, self._t >= 8, {}


register_env("space-env", SpaceEnv)

TINY = {"PPO": {"num_envs_per_worker": 2, "train_batch_size": 32, "minibatch_size": 16, "num_epochs": 1},
        "DQN": {"num_envs_per_worker": 2, "num_steps_sampled_before_learning_starts": 16, "train_batch_size": 8,
                "train_freq": 8, "min_sample_timesteps_per_iteration": 32, "replay_buffer_config": {"capacity": 64}},
        "SAC": {"num_envs_per_worker": 2, "num_steps_sampled_before_learning_starts": 16, "train_batch_size": 8,
                "train_freq": 8, "min_sample_timesteps_per_iteration": 32, "replay_buffer_config": {"capacity": 64}}}
TINY["TD3"] = TINY["SAC"]
TINY["A2C"] = {"num_envs_per_worker": 2, "train_batch_size": 32}
TINY["IMPALA"] = {"num_workers": 0, "num_envs_per_worker": 2, "train_batch_size": 32, "min_sample_timesteps_per_iteration": 32}
TINY["ES"] = {"num_workers": 0, "episodes_per_batch": 2, "train_batch_size": 16, "noise_size": 100_000,
              "observation_filter": "NoFilter"}
TRAINERS = {"PPO": PPO, "A2C": A2C, "IMPALA": IMPALA, "DQN": DQN, "SAC": SAC, "TD3": TD3, "ES": ES}
#: (trainer, sampling mode) pairs run with rollout actors: TD3 samples as SAC does but for its actor,
#: A2C as PPO does, synchronously only, IMPALA (and APPO, its loss aside) from streams only
WITH_ROLLOUT_ACTORS = [(t, m) for t in ("DQN", "PPO", "SAC") for m in ("sync", "streams", "requests")] + [
    ("TD3", "sync"), ("A2C", "sync"), ("IMPALA", "streams"), ("ES", "sync")]


def _config(trainer: str, obs: str, **extra):
    actions = "box" if trainer in ("SAC", "TD3") else "discrete"
    return {"env": "space-env", "env_config": {"obs": obs, "actions": actions}, "seed": 0, **TINY[trainer], **extra}


def test_flattening_in_numpy_and_in_torch_agree_and_follow_gymnasium():
    for name, space in SPACES.items():
        obs = ObsSpace(space)
        space.seed(0)
        batch = batch_of(space, [space.sample() for _ in range(3)])
        flat = obs.flat_numpy(batch)
        assert flat.shape == (3, gym.spaces.flatdim(space)) == (3, obs.flat_dim), name
        assert flat.dtype == np.float32
        np.testing.assert_allclose(obs.flat_torch(to_tensors(batch, "cpu")).numpy(), flat, err_msg=name)
        one = batch_of(space, [space.sample()])
        expected = gym.spaces.flatten(space, gym.spaces.unflatten(space, obs.flat_numpy(one)[0]))
        np.testing.assert_allclose(obs.flat_numpy(one)[0], expected, err_msg=name)


def test_stored_observations_keep_the_env_dtype():
    obs = ObsSpace(SPACES["dict"])
    SPACES["dict"].seed(0)
    batch = batch_of(SPACES["dict"], [SPACES["dict"].sample() for _ in range(2)])
    assert batch["image"].dtype == np.uint8 and batch["image"].shape == (2, 6, 5, 3)
    assert batch["direction"].dtype == np.int64 and batch["speed"].dtype == np.float64
    model_input = obs.model_input(to_tensors(batch, "cpu"))
    assert model_input["image"].dtype == torch.float32 and model_input["image"].shape == (2, 6, 5, 3)
    assert model_input["direction"].shape == (2, 4)  # one-hot


@pytest.mark.parametrize("space", [gym.spaces.Text(5), gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None),
                                   gym.spaces.Dict({"ok": gym.spaces.Discrete(2), "text": gym.spaces.Text(3)})])
def test_a_space_no_trainer_takes_is_one_error_naming_env(space):
    with pytest.raises(ValueError, match=r"^config key 'env': the observation space .* is not supported; "
                                         r"supported: Box, Discrete"):
        check_supported(space)


def test_a_trainer_refuses_an_unsupported_space_before_it_samples():
    class TextEnv(SpaceEnv):
        def __init__(self, config):
            super().__init__({"obs": "discrete"})
            self.observation_space = gym.spaces.Text(4)

    with pytest.raises(ValueError, match=r"^config key 'env': the observation space Text\(.* of <class .*TextEnv'>"):
        PPO(config={"env": TextEnv, **TINY["PPO"]})


@pytest.mark.parametrize("obs", sorted(SPACES))
@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_every_space_learns_in_process(trainer, obs):
    algo = TRAINERS[trainer](config=_config(trainer, obs))
    try:
        results = [algo.train() for _ in range(2)]
        assert results[-1]["env_steps_total"] > 0 and np.isfinite(results[-1]["episode_return_mean"])
    finally:
        algo.stop()


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("trainer, mode", WITH_ROLLOUT_ACTORS)
def test_every_kind_of_space_learns_with_rollout_actors(trainer, mode):
    sampling = {"sync": {"sample_async": False}, "streams": {"sample_async": True},
                "requests": {"sample_async": True, "max_requests_in_flight_per_worker": 2}}[mode]
    algo = TRAINERS[trainer](config=_config(trainer, "all", num_workers=1, num_cpus_per_worker=0.25,
                                            num_envs_per_worker=1, **sampling))
    try:
        results = [algo.train() for _ in range(2)]
        assert results[-1]["env_steps_total"] > 0
    finally:
        algo.stop()


def test_an_image_fragment_stays_uint8_in_process():
    from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic

    kwargs = {"obs_dim": ObsSpace(IMAGE).flat_dim, "observation_space": IMAGE,
              "action_space": gym.spaces.Discrete(2), "hidden_sizes": [8], "activation": "tanh"}
    worker = RolloutWorker(env=SpaceEnv, env_config={"obs": "image"}, num_envs=2,
                           policy_factory=make_numpy_actor_critic, policy_kwargs=kwargs, seed=0)
    fragment = worker.sample(5)
    assert fragment.obs.dtype == np.uint8 and fragment.obs.shape == (5, 2, 6, 5, 3)
    assert fragment.last_obs.dtype == np.uint8


@pytest.mark.usefixtures("ray_session")
def test_image_observations_cross_ray_and_sit_in_the_replay_buffer_as_uint8():
    import ray

    algo = DQN(config=_config("DQN", "image", num_workers=1, num_cpus_per_worker=0.25, num_envs_per_worker=2))
    try:
        algo.train()
        actor = algo.workers.actors[1]
        fragment = ray.get(actor.sample.remote(4, algo.workers.weights_version, [algo.policy.get_weights()]))
        assert fragment.obs.dtype == np.uint8 and fragment.obs.shape == (4, 2, 6, 5, 3)
        buffer = algo.buffer
        assert buffer.data["obs"].dtype == np.uint8 and buffer.data["next_obs"].dtype == np.uint8
        pixels = int(np.prod(IMAGE.shape))
        # observation and next observation, one byte a pixel; the action (int64), reward and discount
        assert buffer.bytes_per_transition == 2 * pixels + 8 + 4 + 4
    finally:
        algo.stop()


@pytest.mark.parametrize("shape, cnn, features", [((4, 84, 84), "auto", 512), ((84, 84, 3), "nature", 512),
                                                  ((7, 7, 3), "auto", 512)])
def test_an_image_goes_through_a_cnn_whichever_its_channel_axis(shape, cnn, features):
    from algorithms.models.encoders import Encoder

    space = gym.spaces.Box(0, 255, shape, np.uint8)
    encoder = Encoder(space, cnn)
    nature = min(s for s in shape if s > 4) >= 36
    assert encoder.features == features
    assert len(encoder.cnns["leaf"].convs) == 7 and encoder.cnns["leaf"].convs[0].kernel_size == ((8, 8) if nature else (2, 2))
    space.seed(0)
    out = encoder(ObsSpace(space).model_input(to_tensors(batch_of(space, [space.sample() for _ in range(3)]), "cpu")))
    assert out.shape == (3, features) and torch.isfinite(out).all()


def test_a_dict_encodes_each_key_and_concatenates():
    from algorithms.models.encoders import Encoder

    encoder = Encoder(SPACES["dict"])
    assert encoder.features == 512 + 4 + 2  # the image's CNN, the one-hot direction, the speed
    batch = batch_of(SPACES["dict"], [SPACES["dict"].sample() for _ in range(2)])
    assert encoder(ObsSpace(SPACES["dict"]).model_input(to_tensors(batch, "cpu"))).shape == (2, 518)


def test_the_built_in_models_take_a_cnn_for_images_and_the_fast_paths_otherwise():
    from algorithms.models.contract import EncoderModel

    from algorithms.models.encoders import Encoder

    ppo = PPO(config=_config("PPO", "dict"))
    dqn = DQN(config=_config("DQN", "image"))
    sac = SAC(config=_config("SAC", "dict"))
    flat = PPO(config=_config("PPO", "multidiscrete"))
    try:
        assert isinstance(ppo.policy.module, EncoderModel) and ppo.learner_name == "torch"
        assert dqn.policy.numpy_kwargs is None and isinstance(dqn.policy.network[0], Encoder)
        assert not sac.policy.builtin and isinstance(sac.policy.critic.encoder, Encoder)
        assert isinstance(sac.policy.actor.module[0], Encoder)
        assert flat.learner_name == "numpy"  # flat spaces keep the numpy fast path
    finally:
        for algo in (ppo, dqn, sac, flat):
            algo.stop()


def test_a_bad_cnn_option_names_the_key():
    with pytest.raises(ValueError, match=r"config key 'model.cnn': must be one of \['auto', 'nature', 'small'\]"):
        PPO.resolve_config({"env": "CartPole-v1", "model": {"cnn": "resnet"}})
