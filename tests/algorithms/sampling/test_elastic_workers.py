"""Elastic trials: a PPO trainer running in its placement group grows from 2 to 4 rollout actors
(in extension groups) and back to 2 mid-training, its learner untouched and no sampled step lost."""

from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import ray
from ray.exceptions import RayActorError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from algorithms import PPO, register_env


pytestmark = pytest.mark.usefixtures("ray_session")

LEARNER_CPUS, WORKER_CPUS = 0.25, 0.1
CONFIG = {"env": "CartPole-v1", "num_workers": 2, "num_envs_per_worker": 2, "train_batch_size": 128,
          "minibatch_size": 64, "num_epochs": 1, "seed": 0, "num_cpus_for_learner": LEARNER_CPUS,
          "num_cpus_per_worker": WORKER_CPUS}


class SlowStartEnv(gym.Wrapper):
    """CartPole whose rollout actors past the trial's own two (extensions) come up only once the
    test creates ``config["gate"]``: an actor that takes long to start."""

    def __init__(self, config):
        gate, deadline = Path(config["gate"]), time.monotonic() + 120
        while config.worker_index > 2 and not gate.exists():  # the test opens the gate
            assert time.monotonic() < deadline, "the test never opened the gate"
            time.sleep(0.05)
        super().__init__(gym.make("CartPole-v1"))


register_env("slow-start", SlowStartEnv)
#: The Host actors build their trainers from this module's env: they import it (tests/conftest.py).
SENT_BY_REFERENCE = "registers the slow-start env at import"


def plain(value):
    """Tensors as numpy arrays, containers as lists and dicts: comparable with ``same``."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy().copy()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


@ray.remote
class Host:
    """The trial actor's part: a trainer inside bundle 0 of the trial's placement group."""

    def __init__(self, config):
        self.trainer = PPO(config=config)

    def train(self):
        result = self.trainer.train()
        return {k: result[k] for k in ("env_steps_total", "num_workers", "training_iteration")}

    def learner(self):
        state = self.trainer.learner_state()
        weights = {k: v.detach().cpu().numpy().copy() for k, v in self.trainer.policy.state_dict().items()}
        return weights, plain(state), self.trainer.env_steps_total

    def update(self, bundles, groups):
        return self.trainer.update_resources(bundles, groups)

    def actors(self):
        return dict(self.trainer.workers.actors)

    def retired(self):
        return list(self.trainer.workers.retired)

    def stop(self):
        self.trainer.stop()

    def parked(self):
        from algorithms.sampling.rollout_actors import PARKED

        return PARKED.indices()


def same_learner(a, b) -> bool:
    """Weights, optimiser state and counters equal; and the optimiser state is not empty."""
    return bool(a[1]) and same(list(a), list(b))


@pytest.mark.parametrize("sample_async", [True, False], ids=["streams", "sync"])
def test_rollout_actors_grow_and_shrink_with_the_bundles(sample_async):
    config = {**CONFIG, "sample_async": sample_async}
    own = PPO.default_resource_request(config)
    assert len(own) == 3
    pg = placement_group(own)
    extensions = [placement_group([{"CPU": WORKER_CPUS}]) for _ in range(2)]
    host = Host.options(num_cpus=LEARNER_CPUS, scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)).remote(config)
    try:
        steps = []
        for _ in range(2):
            result = ray.get(host.train.remote())
            assert result["num_workers"] == 2
            steps.append(result["env_steps_total"])

        before = ray.get(host.learner.remote())
        grown = own + [{"CPU": WORKER_CPUS}] * 2
        assert PPO.accepts_resources(config, grown)
        assert ray.get(host.update.remote(grown, extensions)) is True
        assert same_learner(before, ray.get(host.learner.remote()))  # the learner is untouched
        actors = ray.get(host.actors.remote())
        assert sorted(actors) == [1, 2, 3, 4]
        def sampled(i):
            return ray.get(actors[i].slots_sampled.options(concurrency_group="control").remote())

        for _ in range(200):  # the batches go on while the new actors start; then they sample too
            result = ray.get(host.train.remote())
            assert result["num_workers"] == 4
            steps.append(result["env_steps_total"])
            if len(steps) >= 4 and all(sampled(i) > 0 for i in (3, 4)):
                break
        assert all(sampled(i) > 0 for i in (3, 4))  # in their extension groups

        before = ray.get(host.learner.remote())
        assert ray.get(host.update.remote(own, [])) is True
        assert same_learner(before, ray.get(host.learner.remote()))
        assert sorted(ray.get(host.actors.remote())) == [1, 2]
        for i in (3, 4):  # stopped, not parked
            with pytest.raises(RayActorError):
                ray.get(actors[i].ready.options(concurrency_group="control").remote(), timeout=30)
        retired = ray.get(host.retired.remote())
        assert sorted(i for i, _, _ in retired) == [3, 4]
        for index, sampled, taken in retired:  # every step it sampled went into a batch (or the next)
            assert sampled > 0 and sampled == taken, (index, sampled, taken)
        for _ in range(2):
            result = ray.get(host.train.remote())
            assert result["num_workers"] == 2
            steps.append(result["env_steps_total"])
        assert steps == sorted(steps) and len(set(steps)) == len(steps)  # counters went on

        # grown again, then the trainer stops (its trial ends): the actors of its own group are
        # parked for the next trial of that group, the extensions' killed with their groups to come
        assert ray.get(host.update.remote(grown, extensions)) is True
        actors = ray.get(host.actors.remote())
        ray.get(host.train.remote())
        ray.get(host.stop.remote())
        assert ray.get(host.parked.remote()) == [1, 2]
        for i in (3, 4):
            with pytest.raises(RayActorError):
                ray.get(actors[i].ready.options(concurrency_group="control").remote(), timeout=30)
    finally:
        ray.kill(host)
        for group in [pg] + extensions:
            remove_placement_group(group)


def test_only_rollout_actor_bundles_are_taken_in_place():
    assert not PPO.accepts_resources({**CONFIG, "num_workers": 0}, [{"CPU": 1.0}, {"CPU": 1.0}])
    assert not PPO.accepts_resources(CONFIG, [{"CPU": 0.25}, {"CPU": 0.1}, {"CPU": 0.1}, {"CPU": 0.05}])
    assert not PPO.accepts_resources(CONFIG, [{"CPU": 0.25}, {"CPU": 0.1}, {"CPU": 0.1}, {"GPU": 1.0}])
    assert PPO.accepts_resources(CONFIG, [{"CPU": 0.25}, {"CPU": 0.1}, {"CPU": 0.1}, {"CPU": 0.5}])


def test_batches_do_not_wait_for_a_new_actor_still_starting(tmp_path):
    gate = tmp_path / "gate"
    config = {**CONFIG, "env": "slow-start", "env_config": {"gate": str(gate)}, "sample_async": True}
    own = PPO.default_resource_request(config)
    pg = placement_group(own)
    extension = placement_group([{"CPU": WORKER_CPUS}])
    host = Host.options(num_cpus=LEARNER_CPUS, scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)).remote(config)
    try:
        ray.get(host.train.remote())
        assert ray.get(host.update.remote(own + [{"CPU": WORKER_CPUS}], [extension])) is True
        for _ in range(3):  # the two actors that are up fill the batches meanwhile
            assert ray.get(host.train.remote(), timeout=60)["num_workers"] == 3
        new = ray.get(host.actors.remote())[3]
        assert not gate.exists()
        gate.touch()
        sampled = 0
        for _ in range(200):  # it comes up and samples into the batches from then on
            ray.get(host.train.remote(), timeout=60)
            sampled = ray.get(new.slots_sampled.options(concurrency_group="control").remote())
            if sampled:
                break
        assert sampled > 0
        assert ray.get(host.update.remote(own, [])) is True
        (index, sampled, taken), = ray.get(host.retired.remote())
        assert index == 3 and sampled == taken  # every step it sampled went into a batch (or the next)
    finally:
        ray.kill(host)
        for group in (pg, extension):
            remove_placement_group(group)


def test_growing_again_keeps_the_actors_already_added():
    config = {**CONFIG, "sample_async": True}
    own = PPO.default_resource_request(config)
    pg = placement_group(own)
    extensions = [placement_group([{"CPU": WORKER_CPUS}]) for _ in range(2)]
    host = Host.options(num_cpus=LEARNER_CPUS, scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)).remote(config)
    try:
        ray.get(host.train.remote())
        assert ray.get(host.update.remote(own + [{"CPU": WORKER_CPUS}], extensions[:1])) is True
        first = ray.get(host.actors.remote())[3]
        ray.get(host.train.remote())
        # the controller hands over every group the trial holds, the first one again (a new handle)
        assert ray.get(host.update.remote(own + [{"CPU": WORKER_CPUS}] * 2, extensions)) is True
        actors = ray.get(host.actors.remote())
        assert sorted(actors) == [1, 2, 3, 4]
        assert actors[3]._actor_id == first._actor_id  # kept, not let go and started again
        assert ray.get(host.retired.remote()) == []
        assert ray.get(host.train.remote())["num_workers"] == 4
    finally:
        ray.kill(host)
        for group in [pg] + extensions:
            remove_placement_group(group)
