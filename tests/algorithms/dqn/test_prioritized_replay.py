"""DQN with prioritized replay: its keys, the loss weighted and the priorities it drew renewed by
hand, the priorities through a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import DQN
from algorithms.data.prioritized_replay import PrioritizedReplayBuffer


@pytest.mark.parametrize("key, value, match", [
    ("prioritized_replay", 1, "must be True or False"),
    ("prioritized_replay_alpha", -1, "must be a number >= 0"),
    ("prioritized_replay_beta", 1.5, r"must be in \[0, 1\]"),
    ("prioritized_replay_eps", 0, "must be a number > 0"),
])
def test_bad_values_name_their_key(key, value, match):
    with pytest.raises(ValueError, match=rf"config key '{key}': {match}"):
        DQN(config={"env": "CartPole-v1", key: value})


SMALL = {"env": "CartPole-v1", "hidden_sizes": [32], "min_sample_timesteps_per_iteration": 64, "train_freq": 16,
         "gradient_steps": 4, "learning_starts": 32, "target_network_update_freq": 64, "train_batch_size": 32,
         "replay_buffer_config": {"capacity": 1000}, "prioritized_replay": True, "seed": 0}


def test_dqn_weights_its_loss_and_renews_the_priorities_it_drew():
    trainer = DQN(config=SMALL)
    try:
        trainer.train()
        assert isinstance(trainer.buffer, PrioritizedReplayBuffer)
        batch = trainer._replayed()  # noqa: SLF001 - the learner's own draw
        policy = trainer.policy
        with torch.no_grad():
            best = policy.q(policy.network, batch["next_obs"]).argmax(-1, keepdim=True)
            y = batch["rewards"] + batch["discounts"] * policy.q(policy.target, batch["next_obs"]).gather(-1, best)[:, 0]
            q = policy.q(policy.network, batch["obs"]).gather(-1, batch["actions"][:, None])[:, 0]
            expected = (batch["weights"] * torch.nn.functional.smooth_l1_loss(q, y, reduction="none")).mean()
        stats = trainer.update(batch)
        assert float(stats["td_loss"]) == pytest.approx(float(expected), rel=1e-5)
        slots = batch["indices"].numpy()
        np.testing.assert_allclose(trainer.buffer.tree.get(slots), (np.abs((q - y).numpy()) + 1e-6) ** 0.6, rtol=1e-5)
    finally:
        trainer.stop()


def test_dqn_checkpoints_keep_the_priorities_with_the_buffer(tmp_path):
    config = {**SMALL, "store_buffer_in_checkpoints": True}
    trainer = DQN(config=config)
    try:
        trainer.train()
        trainer.train()
        priorities = trainer.buffer.state()["priorities"]
        assert len(np.unique(priorities)) > 1  # renewed by the updates
        saved = trainer.save(str(tmp_path))
    finally:
        trainer.stop()
    restored = DQN(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_allclose(restored.buffer.state()["priorities"], priorities)
    finally:
        restored.stop()
