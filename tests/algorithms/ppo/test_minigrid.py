"""PPO learns a MiniGrid task from its Dict observation (image through the small CNN, direction
one-hot), small enough for CI."""

from __future__ import annotations

import pytest

from algorithms import PPO

# MiniGrid-Empty-5x5: reach the green square; a random walk's return is near 0.1, an agent that
# walks straight there gets about 0.95 (1 - 0.9 * steps / max_steps).
TARGET = 0.8


@pytest.mark.slow  # trains to a return
def test_ppo_learns_minigrid_from_its_dict_observation():
    trainer = PPO(config={"env": "MiniGrid-Empty-5x5-v0", "seed": 0, "num_envs_per_worker": 8,
                          "train_batch_size": 1024, "minibatch_size": 256, "num_epochs": 4, "lr": 1e-3,
                          "gamma": 0.99, "metrics_num_episodes_for_smoothing": 50})
    try:
        assert trainer.observation_space.spaces.keys() == {"image", "direction"}
        returns = []
        for _ in range(30):
            result = trainer.train()
            returns.append(result["episode_return_mean"])
            if returns[-1] >= TARGET:
                break
        assert returns[-1] >= TARGET, f"mean return by iteration: {[round(r, 2) for r in returns]}"
        assert result["learner"] == "torch"
    finally:
        trainer.stop()
