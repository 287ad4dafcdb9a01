"""DQN: config errors, the double-Q target by hand, per-worker exploration, checkpoints with and
without the replay buffer, n-step replay against the trajectory, a killed rollout actor (ASHA and
PBT sweeps: tests/algorithms/test_trainers_tune.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import DQN

SMALL = {"env": "CartPole-v1", "hidden_sizes": [32], "min_sample_timesteps_per_iteration": 64, "train_freq": 16,
         "gradient_steps": 4, "learning_starts": 32, "target_network_update_freq": 64, "train_batch_size": 32,
         "replay_buffer_config": {"capacity": 1000}, "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5}


def test_unknown_key_names_itself_and_lists_allowed_keys():
    with pytest.raises(ValueError, match=r"DQN config: unknown key 'clip_param'; allowed keys: \[.*'double_q'"):
        DQN(config={"env": "CartPole-v1", "clip_param": 0.2})


@pytest.mark.parametrize("key, value, match", [
    ("train_freq", 0, "must be an int >= 1"),
    ("n_step", 1.5, "must be an int >= 1"),
    ("replay_buffer_config", {"size": 10}, r"must be \{'capacity': int >= 1\}"),
    ("epsilon", [[0, 1.0], [10, 2.0]], r"values must be in \[0, 1\]"),
    ("epsilon", 0.1, r"must be a list of \[env_steps, value\] pairs"),
    ("tau", 0, r"must be in \(0, 1\]"),
    ("double_q", "yes", "must be True or False"),
    ("store_buffer_in_checkpoints", 1, "must be True or False"),
    ("metrics_num_episodes_for_smoothing", 0, "must be an int >= 1"),
    ("model", {"shared_layers": True}, "DQN's networks share no layers"),
])
def test_bad_values_name_their_key(key, value, match):
    name = "model.shared_layers" if key == "model" else key
    with pytest.raises(ValueError, match=rf"config key '{name}': {match}"):
        DQN(config={"env": "CartPole-v1", key: value})


def test_a_continuous_action_space_is_one_error_naming_env():
    with pytest.raises(ValueError, match=r"config key 'env': DQN needs a Discrete action space"):
        DQN(config={"env": "Pendulum-v1", **{k: v for k, v in SMALL.items() if k != "env"}})


def test_the_update_descends_the_huber_loss_to_the_double_q_target_computed_by_hand():
    trainer = DQN(config={**SMALL, "seed": 0, "lr": 1e-3, "max_grad_norm": None, "n_step": 1})
    try:
        rng = np.random.default_rng(0)
        batch = {"obs": rng.normal(size=(8, 4)).astype(np.float32), "actions": rng.integers(0, 2, 8),
                 "rewards": rng.normal(size=8).astype(np.float32),
                 "next_obs": rng.normal(size=(8, 4)).astype(np.float32),
                 "discounts": np.where(rng.random(8) < 0.3, 0.0, 0.99).astype(np.float32)}
        tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
        net, target = trainer.policy.network, trainer.policy.target
        with torch.no_grad():
            target.body[0].weight.add_(0.5)  # the target network differs from the online one
            best = net(tensors["next_obs"]).argmax(-1)  # double Q: the online network chooses ...
            next_value = target(tensors["next_obs"])[torch.arange(8), best]  # ... the target network values
            y = tensors["rewards"] + tensors["discounts"] * next_value
            q = net(tensors["obs"])[torch.arange(8), tensors["actions"]]
            expected = torch.where((q - y).abs() < 1, 0.5 * (q - y) ** 2, (q - y).abs() - 0.5).mean()
        before = [p.detach().clone() for p in net.parameters()]
        stats = trainer.update(tensors)
        assert float(stats["td_loss"]) == pytest.approx(float(expected), rel=1e-5)
        assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))
    finally:
        trainer.stop()


def _replay_after_sampling(n_step):
    """The replay buffer (oldest first) after 1,500 env steps of random actions in the learner's
    process, on CartPole cut off at 30 steps: truncations as well as terminations."""
    from algorithms.envs.registry import register_env

    import gymnasium as gym

    register_env("cartpole-30", lambda cfg: gym.make("CartPole-v1", max_episode_steps=30))
    trainer = DQN(config={"env": "cartpole-30", "seed": 3, "n_step": n_step, "gamma": 0.9, "train_freq": 100,
                          "epsilon": [[0, 1.0]], "learning_starts": 10**6, "hidden_sizes": [8],
                          "min_sample_timesteps_per_iteration": 1500})
    try:
        trainer.train()
        return trainer.buffer.state()
    finally:
        trainer.stop()


def test_n_step_replay_holds_the_transitions_the_one_step_trajectory_implies():
    """Sampling, fragments, held rows and the buffer together: the 3-step transitions in the buffer
    are those that SB3's NStepReplayBuffer rule makes of the same trajectory (the 1-step run of the
    same seed): the discounted sum of up to 3 rewards, stopping at an episode's end, bootstrapping
    with gamma ** k from the last observation unless the episode terminated there."""
    one, three = _replay_after_sampling(1), _replay_after_sampling(3)
    assert (one["discounts"] == 0).sum() > 10 and ((one["discounts"] > 0) & _ends(one)).sum() > 5  # both kinds
    expected = []
    steps = len(one["rewards"])
    for i in range(steps):
        reward, discount, j = 0.0, 1.0, i
        for k in range(3):
            j = i + k
            reward += discount * float(one["rewards"][j])
            discount *= 0.9
            if one["discounts"][j] == 0 or _ends(one)[j] or k == 2:
                break
        if j == steps - 1 and one["discounts"][j] > 0 and k < 2:
            continue  # its window is not complete yet: the trainer holds these rows back
        bootstrap = 0.0 if one["discounts"][j] == 0 else discount
        expected.append(_row(one["obs"][i], one["actions"][i], reward, one["next_obs"][j], bootstrap))
    got = [_row(*(three[key][i] for key in ("obs", "actions", "rewards", "next_obs", "discounts")))
           for i in range(len(three["rewards"]))]
    assert sorted(got) == sorted(expected)


def _ends(state):
    """Where an episode ended at a step: the next step's observation is not this one's next_obs."""
    ends = np.ones(len(state["rewards"]), dtype=bool)
    ends[:-1] = ~np.all(state["next_obs"][:-1] == state["obs"][1:], axis=1)
    return ends


def _row(obs, action, reward, next_obs, discount):
    return tuple(np.round(obs, 5)), int(action), round(float(reward), 4), tuple(np.round(next_obs, 5)), round(float(discount), 4)


@pytest.mark.slow  # trains to a return
def test_cartpole_learns_in_process_and_reports_its_metrics():
    trainer = DQN(config={"env": "CartPole-v1", "seed": 0, "min_sample_timesteps_per_iteration": 1000,
                          "lr": 2.3e-3, "train_batch_size": 64, "train_freq": 256, "gradient_steps": 128,
                          "target_network_update_freq": 10, "learning_starts": 1000,
                          "epsilon": [[0, 1.0], [8000, 0.04]], "dueling": False, "double_q": False,
                          "max_grad_norm": 10.0})
    try:
        results = [trainer.train() for _ in range(15)]
    finally:
        trainer.stop()
    last = results[-1]
    assert last["sampling_layout"] == "in the learner: 1 env" and last["learner"] == "torch"
    assert last["env_steps_total"] >= 15_000 and last["num_updates"] > 0 and last["epsilon"] == pytest.approx(0.04)
    assert results[0]["episode_return_mean"] < 40 < last["episode_return_mean"]  # random play is ~22


@pytest.mark.usefixtures("ray_session")
def test_each_rollout_actor_explores_with_its_own_epsilon_and_a_killed_one_is_replaced():
    import ray

    trainer = DQN(config={**SMALL, "seed": 0, "num_workers": 3, "epsilon": [[0, 0.5], [10, 0.5]]})
    try:
        trainer.train()
        epsilons = [ray.get(actor.__ray_call__.remote(lambda worker: worker.policy.epsilon))
                    for _, actor in sorted(trainer.workers.actors.items())]
        assert epsilons == pytest.approx([0.5, 0.5 ** 4.5, 0.5 ** 8])  # Ape-X: eps ** (1 + 7 (i-1)/(N-1))
        victim = trainer.workers.actors[2]
        ray.kill(victim)
        result = trainer.train()
        assert result["num_worker_restarts"] == 1 and trainer.workers.actors[2] is not victim
        assert result["env_steps_this_iter"] >= 64
    finally:
        trainer.stop()


@pytest.mark.parametrize("store_buffer", [True, False], ids=["with-buffer", "without-buffer"])
def test_checkpoint_round_trip(tmp_path, store_buffer):
    config = {**SMALL, "seed": 0, "store_buffer_in_checkpoints": store_buffer, "learning_starts": 200}
    trainer = DQN(config=config)
    try:
        for _ in range(4):
            trainer.train()
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
        size, updates = len(trainer.buffer), trainer.num_updates
        assert updates > 0
    finally:
        trainer.stop()
    restored = DQN(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_array_equal(restored.compute_actions(obs, explore=False), actions)
        assert restored.env_steps_total == trainer.env_steps_total and restored.num_updates == updates
        result = restored.train()
        # n-step windows: the last n_step - 1 env steps wait for the next ones before they are transitions
        # (the restored trainer's env starts anew: those held at the save are not in the buffer)
        new_rows = result["env_steps_this_iter"] - (restored.cfg["n_step"] - 1)
        if store_buffer:  # it learns at once, from the buffer it had
            assert len(restored.buffer) == min(size + new_rows, 1000)
            assert result["num_updates"] > updates
        else:  # it refills before learning: 64 new steps are fewer than learning_starts
            assert result["replay_size"] == new_rows and result["num_updates"] == updates
    finally:
        restored.stop()


def make_q_module(observation_space, action_space, model_config):
    """A user's Q network: LayerNorm and relu, Q-values of shape (batch, actions)."""
    width = model_config.get("width", 32)
    return torch.nn.Sequential(torch.nn.Linear(observation_space.shape[0], width), torch.nn.LayerNorm(width),
                               torch.nn.ReLU(), torch.nn.Linear(width, int(action_space.n)))


def make_wrong_q_module(observation_space, action_space, model_config):
    return torch.nn.Linear(observation_space.shape[0], 3)  # CartPole has 2 actions


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("num_workers", [0, 2], ids=["in-process", "rollout-actors"])
def test_a_module_of_ones_own_learns_and_round_trips(tmp_path, num_workers):
    config = {**{k: v for k, v in SMALL.items() if k != "hidden_sizes"}, "seed": 0, "model": make_q_module,
              "model_config": {"width": 16}, "num_workers": num_workers}
    trainer = DQN(config=config)
    try:
        first = trainer.train()
        result = trainer.train()
        assert result["num_updates"] > first["num_updates"] > 0
        assert isinstance(trainer.policy.network[1], torch.nn.LayerNorm)
        saved = trainer.save(str(tmp_path))
        obs = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
        actions = trainer.compute_actions(obs, explore=False)
    finally:
        trainer.stop()
    restored = DQN(config=config)
    try:
        restored.restore(saved)
        np.testing.assert_array_equal(restored.compute_actions(obs, explore=False), actions)
    finally:
        restored.stop()


def test_a_module_with_the_wrong_output_shape_is_one_error_naming_model_before_sampling():
    with pytest.raises(ValueError, match=r"config key 'model' \(make_wrong_q_module\): DQN's forward\(obs\) must "
                                         r"return Q-values of shape \(batch, 2\).*got a tensor of shape \(2, 3\)"):
        DQN(config={"env": "CartPole-v1", "model": make_wrong_q_module})
