"""env_threads=True: a rollout actor's envs stream apart, each in a thread of its own."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from algorithms import DQN, PPO
from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
from algorithms.sampling.rollout_worker import RolloutWorker

POLICY = {"obs_dim": 4, "action_space": gym.spaces.Discrete(2), "hidden_sizes": [8], "activation": "tanh"}


class GatedEnv(gym.Wrapper):
    """CartPole whose steps wait on ``config["gates"][vector or lane index]`` (an Event): a closed
    gate holds its env alone."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self._gate = config["gates"][config.worker_index * 10 + config.vector_index]

    def step(self, action):
        assert self._gate.wait(30), "the test never opened this env's gate"
        return self.env.step(action)


def _wait_for(condition, timeout=30.0):
    """The first true value of ``condition()`` (called once per poll: a take consumes), or the last."""
    deadline = time.monotonic() + timeout
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


def test_each_env_streams_on_while_another_is_held():
    gates = {i: threading.Event() for i in range(3)}
    worker = RolloutWorker(env=lambda config: GatedEnv(config), env_config={"gates": gates}, num_envs=3,
                           policy_factory=make_numpy_actor_critic, policy_kwargs=POLICY, seed=0, env_threads=True)
    weights = make_numpy_actor_critic(**POLICY).get_weights()
    out = []
    streaming = threading.Thread(target=lambda: out.append(worker.stream(1, [weights], request=5)))
    gates[0].set()
    gates[2].set()  # env 1 stays held: the other two step on
    streaming.start()
    try:
        lanes = worker._threads.lanes
        assert _wait_for(lambda: lanes[0].slots_sampled() >= 20 and lanes[2].slots_sampled() >= 20)
        fragments = worker.take()
        assert isinstance(fragments, list) and all(f.valid.shape[1] == 1 for f in fragments)
        assert sum(f.slots for f in fragments) >= 40 and len(fragments) == 2  # env 1 has not stepped
        assert all(np.all(f.weights_versions == 1) for f in fragments)
        gates[1].set()
        assert _wait_for(lambda: worker.take() is not None)
    finally:
        for gate in gates.values():
            gate.set()
        worker.abort(5)  # the streams end between two steps
        streaming.join(30)
    assert out == [None] and not streaming.is_alive()
    worker.close()


def test_the_lanes_draw_different_envs_and_actions():
    gates = {i: threading.Event() for i in range(2)}
    for gate in gates.values():
        gate.set()
    worker = RolloutWorker(env=lambda config: GatedEnv(config), env_config={"gates": gates}, num_envs=2,
                           policy_factory=make_numpy_actor_critic, policy_kwargs=POLICY, seed=0, env_threads=True)
    first, second = (lane.obs for lane in worker._threads.lanes)
    assert not np.array_equal(first, second)
    worker.close()


@pytest.mark.usefixtures("ray_session")
def test_ppo_streams_from_env_threads_of_rollout_actors():
    trainer = PPO(config={"env": "CartPole-v1", "num_workers": 2, "num_envs_per_worker": 3, "sample_async": True,
                          "env_threads": True, "num_cpus_per_worker": 0.25, "num_cpus_for_learner": 0.5,
                          "train_batch_size": 240, "minibatch_size": 60, "num_epochs": 1, "seed": 1})
    try:
        results = [trainer.train() for _ in range(3)]
        assert all(r["env_steps_this_iter"] >= 200 for r in results)  # transitions: reset steps take slots
        assert results[-1]["episodes_total"] > 0
        workers = trainer.workers
        assert set(workers._taken_slots) == {1, 2}  # both actors' lanes reached the batches
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer, changes", [
    (PPO, {"num_workers": 2, "sample_async": False}),
    (PPO, {"num_workers": 0, "sample_async": True}),
    (DQN, {"num_workers": 2, "sample_async": True}),
])
def test_env_threads_needs_streaming_actors_of_an_on_policy_trainer(trainer, changes):
    with pytest.raises(ValueError, match="env_threads"):
        trainer.resolve_config({"env": "CartPole-v1", "env_threads": True, **changes})
