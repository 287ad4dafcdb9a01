"""num_workers="auto": in the learner for a fast env, rollout actors for a slow or uneven one."""

from __future__ import annotations

import os

import pytest

from algorithms import PPO, register_env
from algorithms.sampling.layout import EnvTiming, choose
from tuner import tune

BASE = {"train_batch_size": 2048, "num_envs_per_worker": 8, "num_cpus_for_learner": 1.0}


def _timing(mean_ms, p95_ms=None, cpu_share=1.0):
    return EnvTiming(mean_s=mean_ms / 1e3, median_s=mean_ms / 1e3, p95_s=(p95_ms or mean_ms) / 1e3,
                     cpu_share=cpu_share, steps=100)


def test_a_fast_even_env_samples_in_the_learner():
    decision = choose(_timing(0.01), BASE, {}, cluster_cpus=8)
    assert decision["num_workers"] == 0 and "learner" in decision["reason"]


def test_a_slow_env_gets_one_asynchronous_actor_per_env_sized_by_its_cpu_use():
    decision = choose(_timing(6.0, cpu_share=0.02), BASE, {}, cluster_cpus=2)
    assert decision == {**decision, "num_workers": 8, "num_envs_per_worker": 1, "sample_async": True,
                        "num_cpus_per_worker": 0.05}
    assert "slow" in decision["reason"] and "8 rollout actors" in decision["reason"]
    cpu_bound = choose(_timing(6.0, cpu_share=1.0), BASE, {}, cluster_cpus=4)
    assert cpu_bound["num_workers"] == 3 and cpu_bound["num_cpus_per_worker"] == 1.0  # 4 CPUs: 1 learner + 3


def test_a_waiting_env_of_a_streaming_trainer_gets_env_threads_in_as_few_actors_as_its_cpu_use_allows():
    waits = choose(_timing(6.0, p95_ms=100.0, cpu_share=0.05), BASE, {}, cluster_cpus=2, threads_allowed=True)
    assert waits == {**waits, "num_workers": 1, "num_envs_per_worker": 8, "env_threads": True, "sample_async": True,
                     "num_cpus_per_worker": 0.4}
    assert "it waits: 5% of its step on the CPU: 1 rollout actor of 8 envs, each env in a thread" in waits["reason"]
    busier = choose(_timing(6.0, cpu_share=0.2), BASE, {}, cluster_cpus=8, threads_allowed=True)
    assert (busier["num_workers"], busier["num_envs_per_worker"], busier["num_cpus_per_worker"]) == (4, 2, 0.4)
    for given, allowed in (({}, False), ({"env_threads": False}, True), ({"sample_async": False}, True)):
        kept = choose(_timing(6.0, cpu_share=0.05), BASE, given, cluster_cpus=2, threads_allowed=allowed)
        assert "env_threads" not in kept and kept["num_envs_per_worker"] == 1, (given, kept)
    computes = choose(_timing(6.0, cpu_share=0.9), BASE, {}, cluster_cpus=4, threads_allowed=True)
    assert "env_threads" not in computes and computes["num_workers"] == 3


def test_an_uneven_env_gets_actors_even_when_its_mean_is_small():
    decision = choose(_timing(0.1, p95_ms=5.0, cpu_share=0.5), BASE, {}, cluster_cpus=16)
    assert decision["num_workers"] == 8 and "uneven" in decision["reason"]


def test_keys_the_user_gave_are_kept():
    decision = choose(_timing(6.0, cpu_share=0.02), BASE, {"sample_async": False, "num_cpus_per_worker": 0.5},
                      cluster_cpus=3)
    assert decision["sample_async"] is False and decision["num_cpus_per_worker"] == 0.5
    assert decision["num_workers"] == 4  # (3 - 1 learner CPU) / 0.5


@pytest.mark.usefixtures("ray_session")
def test_auto_resolves_cartpole_in_process_and_the_slow_simulator_to_actors():
    fast = PPO.resolve_config({"env": "CartPole-v1", "num_workers": "auto"})
    assert fast["num_workers"] == 0
    slow = PPO.resolve_config({"env": "tuner/SlowCartPole-v1", "num_workers": "auto", "num_envs_per_worker": 4})
    assert slow["num_workers"] == 1 and slow["num_envs_per_worker"] == 4 and slow["env_threads"] is True
    assert slow["sample_async"] is True and "it waits" in slow["_layout_reason"]
    from algorithms import DQN

    off_policy = DQN.resolve_config({"env": "tuner/SlowCartPole-v1", "num_workers": "auto", "num_envs_per_worker": 4})
    assert off_policy["num_workers"] == 4 and off_policy["num_envs_per_worker"] == 1  # no env threads off-policy


def test_a_bad_num_workers_names_the_key():
    with pytest.raises(ValueError, match=r"config key 'num_workers': must be an int >= 0 or 'auto', got 'many'"):
        PPO.resolve_config({"env": "CartPole-v1", "num_workers": "many"})


@pytest.mark.usefixtures("ray_session")
def test_a_trial_runs_the_layout_the_driver_chose_and_tuner_show_says_why(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    analysis = tune.run("PPO", config={"env": "tuner/SlowCartPole-v1", "env_config": {"fast_ms": 1.0, "slow_prob": 0.0},
                            "num_workers": "auto", "num_envs_per_worker": 2, "train_batch_size": 1024,
                            "minibatch_size": 512, "num_epochs": 1, "seed": 0},
             stop={"training_iteration": 1}, storage_path=str(tmp_path), name="shown", verbose=0)
    (trial,) = analysis.trials  # its placement group had the bundles the driver's layout asked for
    assert trial.status == "TERMINATED" and trial.last_result["sampling_layout"] == "1 rollout actor x 2 envs in threads, async"
    analysis.close()
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "show", "shown", "--storage-path", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "SAMPLING" in out.stdout and "1 rollout actor x 2 envs in threads, async" in out.stdout
    assert "sampling (num_workers='auto'): env step" in out.stdout


def slow_in_driver(config):
    """CartPole whose steps take 5 ms in the process that started the sweep, and no time elsewhere."""
    from algorithms.envs.builtin import SlowCartPole

    return SlowCartPole(fast_ms=5.0 if os.getpid() == config["driver_pid"] else 0.0, slow_prob=0.0)


@pytest.mark.usefixtures("ray_session")
def test_the_trial_runs_the_config_the_driver_resolved_not_one_of_its_own(tmp_path):
    """The env is slow only in the driver, which so chooses rollout actors; a trial that resolved
    its config itself would time a fast env and sample in its own process. The env's name is
    registered in the driver only: the trial gets the creator with its config."""
    register_env("slow-in-driver", slow_in_driver)
    analysis = tune.run("PPO", config={"env": "slow-in-driver", "env_config": {"driver_pid": os.getpid()},
                                       "num_workers": "auto", "num_envs_per_worker": 2, "train_batch_size": 256,
                                       "minibatch_size": 128, "num_epochs": 1, "seed": 0},
                        stop={"training_iteration": 1}, storage_path=str(tmp_path), name="carried", verbose=0)
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["sampling_layout"] == "1 rollout actor x 2 envs in threads, async"
    analysis.close()

