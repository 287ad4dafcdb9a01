"""A trained agent out of a checkpoint, on a process that never trained it: PPO, DQN and SAC,
built-in and user models, flat, Dict and image observations, from a folder and from object
storage; ``agent.act`` gives the trained policy's deterministic actions."""

from __future__ import annotations

import os

import numpy as np
import pytest

import algorithms
from algorithms import DQN, PPO, SAC, load_agent
from algorithms.core.agent import play
from tests.algorithms.dqn.test_dqn import SMALL as DQN_SMALL
from tests.algorithms.sac.test_sac import SMALL as SAC_SMALL
from tests.algorithms.data import test_observations  # noqa: F401 - registers "space-env"
from tests.algorithms.models.test_models import make_my_model

PPO_SMALL = {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1, "num_envs_per_worker": 2}

CASES = {
    "ppo-dict": (PPO, {"env": "space-env", "env_config": {"obs": "dict"}, **PPO_SMALL}),
    "ppo-user-model": (PPO, {"env": "CartPole-v1", "model": make_my_model, **PPO_SMALL}),
    "dqn-image": (DQN, {**DQN_SMALL, "env": "space-env", "env_config": {"obs": "image"}}),
    "sac-flat": (SAC, SAC_SMALL),
}


def _observations(trainer, n: int = 5) -> list:
    env = trainer.make_env()
    obs, _ = env.reset(seed=123)
    seen = [obs]
    for _ in range(n - 1):
        obs, *_ = env.step(env.action_space.sample())
        seen.append(obs)
    env.close()
    return seen


@pytest.mark.parametrize("case", list(CASES))
def test_a_loaded_agent_acts_as_the_trainer_it_was_saved_from(case, tmp_path):
    cls, config = CASES[case]
    trainer = cls(config={**config, "seed": 3})
    trainer.train()
    path = trainer.save(str(tmp_path / "checkpoint"))
    observations = _observations(trainer)
    expected = [trainer.act(obs) for obs in observations]
    trainer.stop()
    for agent in (load_agent(path), cls.from_checkpoint(path)):
        assert type(agent) is cls
        got = [agent.act(obs) for obs in observations]
        for a, b in zip(got, expected):
            np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-5, atol=1e-6)
        agent.stop()


def test_an_agent_plays_episodes_and_records_them(tmp_path):
    trainer = PPO(config={"env": "CartPole-v1", **PPO_SMALL, "seed": 0})
    trainer.train()
    agent = load_agent(trainer.save(str(tmp_path / "checkpoint")))
    trainer.stop()
    played = play(agent, agent.make_env(render_mode="rgb_array"), 2, seed=1000, video_dir=str(tmp_path / "video"))
    assert [e.seed for e in played] == [1000, 1001] and all(e.length >= 8 for e in played)
    assert [e.episode_return for e in played] == [e.episode_return for e in
                                                   play(agent, agent.make_env(), 2, seed=1000)]  # deterministic
    assert sorted(os.listdir(tmp_path / "video")) == ["episode_0.mp4", "episode_1.mp4"]
    assert (tmp_path / "video" / "episode_0.mp4").stat().st_size > 1000
    agent.stop()


def test_what_a_checkpoint_cannot_keep_is_asked_for_by_name(tmp_path):
    trainer = PPO(config={"env": "CartPole-v1", **PPO_SMALL, "model": lambda o, a, c: make_my_model(o, a, c)})
    trainer.train()
    path = trainer.save(str(tmp_path / "checkpoint"))
    trainer.stop()
    with pytest.raises(ValueError, match=r"could not keep config key\(s\) \['model'\].*config=\{'model': \.\.\.\}"):
        load_agent(path)
    load_agent(path, config={"model": make_my_model}).stop()
    with pytest.raises(ValueError, match=r"is a checkpoint of PPO, not of DQN"):
        DQN.from_checkpoint(path)
    with pytest.raises(ValueError, match=r"is not a checkpoint of one of our trainers"):
        load_agent(str(tmp_path))
    assert algorithms.load_agent is load_agent


def test_an_agent_loads_from_object_storage(tmp_path, s3_server, monkeypatch):
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    from tuner.storage import open_storage

    trainer = PPO(config={"env": "CartPole-v1", **PPO_SMALL, "seed": 0})
    trainer.train()
    path = trainer.save(str(tmp_path / "checkpoint"))
    obs = _observations(trainer, 1)[0]
    expected = trainer.act(obs)
    trainer.stop()
    storage = open_storage(s3_server.uri("agents"))
    uri = storage.join("one", "checkpoint_000001")
    storage.upload(path, uri)
    agent = load_agent(uri)
    assert agent.act(obs) == expected
    agent.stop()


def test_an_env_that_cannot_render_is_one_line_and_no_video(tmp_path):
    trainer = PPO(config={"env": "space-env", "env_config": {"obs": "box2d"}, **PPO_SMALL, "seed": 0})
    with pytest.raises(ValueError, match=r"^env .* cannot render frames \(render_mode 'rgb_array' gave NoneType\): "
                                         r"no video$"):
        play(trainer, trainer.make_env(render_mode="rgb_array"), 1, seed=0, video_dir=str(tmp_path / "video"))
    trainer.stop()
    assert not list((tmp_path / "video").iterdir())
