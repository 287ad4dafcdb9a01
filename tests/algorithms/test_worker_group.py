"""Rollout actors: torch-free, reused from trial to trial of a sweep, replaced when one died."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import pytest

from algorithms import PPO, register_env
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")

SMALL = {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1, "num_envs_per_worker": 2,
         "num_cpus_for_learner": 0.5, "num_cpus_per_worker": 0.25}


class DiesOnceEnv(gym.Wrapper):
    """CartPole whose reset kills its process once, when the file ``config["die"]`` exists (the
    file is taken by the first env that sees it)."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self._die = config["die"]

    def reset(self, **kwargs):
        try:
            os.rename(self._die, self._die + ".taken")
        except FileNotFoundError:
            return self.env.reset(**kwargs)
        os._exit(1)


def dies_once_env(config):
    return DiesOnceEnv(config)


def test_rollout_actors_never_import_torch():
    trainer = PPO(config={"env": "CartPole-v1", "num_workers": 1, "seed": 0, **SMALL})
    try:
        trainer.train()
        actor = trainer.workers.actors[1]
        import ray

        assert ray.get(actor.__ray_call__.remote(lambda worker: "torch" in sys.modules)) is False
    finally:
        trainer.stop()


class KillParkedActor(tune.Callback):
    """When the first trial ends, arm the env's kill: the next trial's reused actor dies on reset."""

    def __init__(self, die: str) -> None:
        self.die = die

    def on_trial_complete(self, iteration, trials, trial, **info):
        if not os.path.exists(self.die + ".taken"):
            open(self.die, "w").close()


def test_a_sweep_reuses_rollout_actors_across_trials_and_replaces_a_dead_one(tmp_path):
    register_env("dies-once", dies_once_env)
    die = str(tmp_path / "die")
    analysis = tune.run(
        "PPO",
        # synchronous: an iteration waits for every actor, so the replacement comes in the first one
        config={"env": "dies-once", "env_config": {"die": die}, "num_workers": 2,
                "seed": tune.grid_search([0, 1, 2]), **SMALL},
        stop={"training_iteration": 2},
        max_concurrent_trials=1,  # one trial actor, handed from trial to trial with its rollout actors
        callbacks=[KillParkedActor(die)],
        storage_path=str(tmp_path),
        name="reuse",
        verbose=0,
    )
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    firsts = [analysis.trial_dataframes[t.trial_id].iloc[0] for t in analysis.trials]
    # started: new processes (the second trial's replacement too); reused: taken over from the last trial
    assert [(f["num_workers_started"], f["num_workers_reused"]) for f in firsts] == [(2, 0), (1, 2), (0, 2)]
    assert os.path.exists(die + ".taken")  # the second trial's reused actor died ...
    lasts = [analysis.trial_dataframes[t.trial_id].iloc[-1] for t in analysis.trials]
    assert [r["num_worker_restarts"] for r in lasts] == [0, 1, 0]  # ... and was replaced
    assert all(r["env_steps_total"] > 0 for r in lasts)
    # The profile books the rollout actors' start apart from sampling.
    profiles = analysis.trial_profiles()
    assert all(0 < profiles[t.trial_id]["rollout_start_s"] < profiles[t.trial_id]["hold_s"] for t in analysis.trials)
    analysis.close()


class GatedEnv(gym.Wrapper):
    """CartPole whose steps wait for ``config["gate"]`` after signalling ``config["stepping"]``."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self._gate, self._stepping = config["gate"], config["stepping"]

    def step(self, action):
        self._stepping.set()
        self._gate.wait()
        return self.env.step(action)


def test_an_aborted_request_returns_nothing_whether_running_or_queued():
    import threading

    from algorithms.numpy_policy import make_numpy_actor_critic
    from algorithms.rollout import RolloutWorker

    gate, stepping = threading.Event(), threading.Event()
    worker = RolloutWorker(
        env=lambda config: GatedEnv(config), env_config={"gate": gate, "stepping": stepping}, num_envs=1,
        policy_factory=make_numpy_actor_critic, seed=0,
        policy_kwargs={"obs_dim": 4, "action_space": gym.spaces.Discrete(2), "hidden_sizes": [8], "activation": "tanh"},
    )
    out = []
    running = threading.Thread(target=lambda: out.append(worker.sample(50, request=7)))
    running.start()
    assert stepping.wait(10)  # request 7 is inside its first step
    worker.abort(8)
    gate.set()
    running.join(10)
    assert out == [None]
    assert worker.sample(5, request=8) is None  # queued before the abort: cut short too
    fragment = worker.sample(5, request=9)  # after it: sampled as usual
    assert fragment is not None and fragment["valid"].shape == (5, 1)
    assert worker.sample(5) is not None  # an unnumbered request (the learner's own worker) never is
