"""examples/a2c.py: an algorithm written on DistributedTrainer runs through tune.run and learns."""

from __future__ import annotations

import pytest

from examples.a2c import A2C, main


def test_a2c_sweep_learns_cartpole_with_rollout_actors(ray_session, tmp_path):
    analysis = main(storage_path=str(tmp_path), max_env_steps=20_000)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 2
    assert all(t.last_result["sampling_layout"].startswith("2 rollout actors") for t in analysis.trials)
    assert analysis.best_result["episode_return_mean"] > 100  # a random policy: about 22


def test_a2c_checks_its_keys_and_takes_a_user_model():
    from tests.algorithms.models.test_models import make_my_model

    with pytest.raises(ValueError, match="config key 'gamma'"):
        A2C.resolve_config({"env": "CartPole-v1", "gamma": 2.0})
    trainer = A2C(config={"env": "CartPole-v1", "seed": 0, "model": make_my_model})
    try:
        assert trainer.train()["env_steps_total"] > 0
        assert trainer.reset_config({**trainer.config, "lr": 1e-4}) is True
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
    finally:
        trainer.stop()
