"""The learner's device: a GPU learner where CUDA is (skipped elsewhere), one clear error where it is not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import PPO
from tests.algorithms.models.test_models import SMALL, make_my_model
from tuner import tune

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_gpu_learner_without_cuda_is_one_error_naming_the_key():
    with pytest.raises(RuntimeError, match=r"config key 'num_gpus_for_learner': the learner was given 1 GPU"):
        PPO(config={"env": "CartPole-v1", "num_gpus_for_learner": 1, **SMALL})


def test_a_gpu_learner_on_a_cluster_without_gpus_never_starts(ray_session, tmp_path):
    if ray_session.cluster_resources().get("GPU"):
        pytest.skip("this Ray cluster has GPUs")
    with pytest.raises(ValueError, match=r"bundle \{'CPU': 1.0, 'GPU': 1.0\} fits on no node"):
        tune.run("PPO", config={"env": "CartPole-v1", "num_gpus_for_learner": 1}, stop={"training_iteration": 1},
                 storage_path=str(tmp_path), name="gpu", verbose=0)


@cuda
@pytest.mark.parametrize("model", [{}, make_my_model], ids=["built-in", "user-module"])
def test_the_learner_runs_on_cuda_and_its_rollout_actors_on_cpu(ray_session, model, tmp_path):
    """With rollout actors: the learner on the GPU (Ray finds it), weights crossing as CPU arrays;
    and a checkpoint of a GPU learner restores on a CPU learner with the same actions."""
    config = {"env": "CartPole-v1", "seed": 0, "model": model, "num_gpus_for_learner": 1, "num_workers": 2,
              "num_envs_per_worker": 8}
    analysis = tune.run("PPO", config=config, stop={"env_steps_total": 60_000}, metric="episode_return_mean",
                        mode="max", storage_path=str(tmp_path), name="cuda", checkpoint_at_end=True, verbose=0)
    trial = analysis.trials[0]
    assert trial.status == "TERMINATED", trial.error
    last = trial.last_result
    assert last["learner_device"].startswith("cuda") and last["learner"] == "torch"
    assert last["episode_return_mean"] > 100  # it learns (a random policy: about 22)
    on_gpu = PPO(config={**config, "num_workers": 0})
    on_cpu = PPO(config={**config, "num_workers": 0, "num_gpus_for_learner": 0})
    try:
        on_gpu.train()
        on_cpu.restore(on_gpu.save(str(tmp_path / "ckpt")))
        obs = np.random.default_rng(0).normal(scale=0.1, size=(64, 4)).astype(np.float32)
        np.testing.assert_array_equal(on_gpu.compute_actions(obs, explore=False),
                                      on_cpu.compute_actions(obs, explore=False))
    finally:
        on_gpu.stop()
        on_cpu.stop()


@cuda
@pytest.mark.parametrize("name, env", [("DQN", "CartPole-v1"), ("SAC", "Pendulum-v1"), ("APEX", "CartPole-v1"),
                                       ("TD3", "Pendulum-v1")])
def test_off_policy_learners_run_on_cuda_with_rollout_actors_on_cpu(ray_session, name, env, tmp_path):
    """The networks and the replayed minibatches on the GPU; the actors act on CPU copies."""
    config = {"env": env, "seed": 0, "num_gpus_for_learner": 1, "num_workers": 2, "hidden_sizes": [64],
              "min_sample_timesteps_per_iteration": 256, "train_freq": 64, "gradient_steps": 16, "learning_starts": 128}
    analysis = tune.run(name, config=config, stop={"env_steps_total": 2048}, storage_path=str(tmp_path), name="cuda",
                        checkpoint_at_end=True, verbose=0)
    trial = analysis.trials[0]
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["learner_device"].startswith("cuda") and trial.last_result["num_updates"] > 0


@cuda
@pytest.mark.parametrize("name", ["IMPALA", "APPO"])
def test_vtrace_learners_run_on_cuda_with_streaming_actors_on_cpu(ray_session, name, tmp_path):
    """V-trace's rows (fragments of several weights versions) judged on the GPU, the actors on CPU."""
    config = {"env": "CartPole-v1", "seed": 0, "num_gpus_for_learner": 1, "num_workers": 2,
              "min_sample_timesteps_per_iteration": 1000}
    analysis = tune.run(name, config=config, stop={"env_steps_total": 20_000}, storage_path=str(tmp_path), name="cuda",
                        checkpoint_at_end=True, verbose=0)
    trial = analysis.trials[0]
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["learner_device"].startswith("cuda") and trial.last_result["num_learner_updates"] > 0


#: Small iterations of each trainer that packs.
PACKED = {"PPO": {"env": "CartPole-v1", "num_envs_per_worker": 4, "train_batch_size": 256, "minibatch_size": 64,
                  "num_epochs": 2},
          "DQN": {"env": "CartPole-v1", "min_sample_timesteps_per_iteration": 256,
                  "num_steps_sampled_before_learning_starts": 128},
          "SAC": {"env": "Pendulum-v1", "min_sample_timesteps_per_iteration": 256,
                  "num_steps_sampled_before_learning_starts": 128}}


@cuda
@pytest.mark.parametrize("name", sorted(PACKED))
def test_a_pack_on_a_gpu_learns_there_and_its_members_load_on_a_cpu(ray_session, name, tmp_path):
    """pack_trials with num_gpus_for_learner: one pack process holds the GPU for its members (their
    networks, optimisers and updates there); each member's checkpoint is an agent a CPU loads."""
    import gymnasium as gym

    from algorithms import load_agent

    config = {**PACKED[name], "seed": 0, "num_gpus_for_learner": 1, "hidden_sizes": [64],
              "lr": tune.grid_search([3e-4, 1e-3])}
    analysis = tune.run(name, config=config, stop={"env_steps_total": 1024}, storage_path=str(tmp_path),
                        name=f"cuda_pack_{name}", checkpoint_at_end=True, verbose=0, pack_trials=2)
    for trial in analysis.trials:
        assert trial.status == "TERMINATED", trial.error
        last = trial.last_result
        assert last["learner"] == "packed" and last["learner_device"].startswith("cuda"), last
        assert last["env_steps_total"] >= 1024
    assert len({trial.last_result["pack_id"] for trial in analysis.trials}) == 1  # one process for both
    agent = load_agent(analysis.get_best_checkpoint(analysis.trials[0], metric="training_iteration", mode="max").path)
    assert agent.env_steps_total >= 1024 and agent.act(gym.make(config["env"]).observation_space.sample()) is not None
