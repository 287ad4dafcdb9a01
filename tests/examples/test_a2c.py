"""examples/a2c.py: a sweep of the built-in A2C runs through tune.run and learns CartPole."""

from __future__ import annotations

from examples.a2c import main


def test_a2c_sweep_learns_cartpole_with_rollout_actors(ray_session, tmp_path):
    analysis = main(storage_path=str(tmp_path), max_env_steps=20_000)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 2
    assert all(t.last_result["sampling_layout"].startswith("2 rollout actors") for t in analysis.trials)
    assert analysis.best_result["episode_return_mean"] > 100  # a random policy: about 22
