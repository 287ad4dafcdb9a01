"""Rollout actors: torch-free, reused from trial to trial of a sweep, replaced when one died."""

from __future__ import annotations

import os
import sys
import threading
import time

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


@pytest.mark.parametrize("sample_async", [False, True], ids=["sync", "streams"])
def test_a_sweep_reuses_rollout_actors_across_trials_and_replaces_a_dead_one(tmp_path, sample_async):
    register_env("dies-once", dies_once_env)
    die = str(tmp_path / "die")
    analysis = tune.run(
        "PPO",
        # sync: an iteration waits for every actor; streams: every take asks every actor: either way
        # the replacement comes in the first iteration
        config={"env": "dies-once", "env_config": {"die": die}, "num_workers": 2, "sample_async": sample_async,
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

    from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
    from algorithms.sampling.rollout_worker import RolloutWorker

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
    assert fragment is not None and fragment.valid.shape == (5, 1)
    assert worker.sample(5) is not None  # an unnumbered request (the learner's own worker) never is


class CountedEnv(gym.Wrapper):
    """CartPole whose every step first says it arrived (``config["arrived"]``, a semaphore), then
    waits for a permit (``config["permits"]``): the test lets exactly as many steps run as it wants."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self._arrived, self._permits = config["arrived"], config["permits"]

    def step(self, action):
        self._arrived.release()
        assert self._permits.acquire(timeout=30), "the test never let this step run"
        return self.env.step(action)


def test_a_stream_records_each_steps_weights_and_loads_new_ones_between_two_steps():
    import threading

    import numpy as np

    from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
    from algorithms.sampling.rollout_worker import RolloutWorker

    arrived, permits = threading.Semaphore(0), threading.Semaphore(0)

    def run_steps(n):
        """Let ``n`` more steps run; return once they are recorded (the step after them has arrived)."""
        for _ in range(n):
            permits.release()
        for _ in range(n):
            assert arrived.acquire(timeout=30)

    policy_kwargs = {"obs_dim": 4, "action_space": gym.spaces.Discrete(2), "hidden_sizes": [8], "activation": "tanh"}
    worker = RolloutWorker(env=lambda config: CountedEnv(config), env_config={"arrived": arrived, "permits": permits},
                           num_envs=1, policy_factory=make_numpy_actor_critic, policy_kwargs=policy_kwargs, seed=0)
    first = make_numpy_actor_critic(**policy_kwargs).get_weights()
    second = {name: array + 0.5 for name, array in first.items()}
    out = []
    streaming = threading.Thread(target=lambda: out.append(worker.stream(1, [first], request=3)))
    streaming.start()
    assert arrived.acquire(timeout=30)  # the first step is waiting
    assert worker.take() is None  # nothing recorded yet
    run_steps(5)
    fragment = worker.take()
    assert fragment.valid.shape == (5, 1) and fragment.last_values is None
    assert fragment.weights_versions.tolist() == [1] * 5 and fragment.weights_version == 1
    worker.push_weights(2, [second])
    run_steps(3)  # the step already inside env.step acted with version 1; the next ones with 2
    fragment = worker.take()
    assert fragment.weights_versions.tolist() == [1, 2, 2] and fragment.weights_version == 1
    reference = make_numpy_actor_critic(**policy_kwargs)
    reference.load_weights(second)
    logits, values, _ = reference.forward(fragment.obs[1:, 0])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    taken = fragment.actions[1:, 0].astype(int).reshape(-1)
    np.testing.assert_allclose(fragment.logp[1:, 0], log_probs[np.arange(2), taken], rtol=1e-5)
    np.testing.assert_allclose(fragment.values[1:, 0], values.reshape(-1), rtol=1e-5)
    worker.abort(3)
    permits.release()
    streaming.join(30)
    assert out == [None]


def test_paused_streams_end_and_the_next_batch_starts_them_again():
    import ray

    trainer = PPO(config={"env": "CartPole-v1", "num_workers": 2, "sample_async": True, "seed": 0, **SMALL})
    try:
        trainer.train()
        streams = list(trainer.workers._streams.values())
        trainer.workers.pause()
        assert ray.get(streams, timeout=60) == [None, None]  # the streams returned: the actors rest
        assert trainer.train()["env_steps_this_iter"] > 0
        assert len(trainer.workers._streams) == 2
    finally:
        trainer.stop()



class HeldBuild(gym.Wrapper):
    """CartPole whose build in a rollout actor signals ``<dir>/building.<pid>`` and then waits for
    the file ``<dir>/go`` (every actor) or ``<dir>/go.<pid>`` (this one); in the learner's process
    it builds at once."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        if os.getpid() != config["learner_pid"]:
            directory, pid = config["dir"], os.getpid()
            open(os.path.join(directory, f"building.{pid}"), "w").close()
            while not any(os.path.exists(os.path.join(directory, name)) for name in ("go", f"go.{pid}")):
                time.sleep(0.01)


def start_held_setup(trainer_cls, tmp_path, num_workers):
    """Build ``trainer_cls`` on the held-build env in a thread (its setup waits until the test lets
    the actors go); returns the thread and the list that receives the trainer."""
    register_env("held-build", HeldBuild)
    config = {"env": "held-build", "env_config": {"dir": str(tmp_path), "learner_pid": os.getpid()},
              "num_workers": num_workers, "sample_async": True, "seed": 0, **SMALL}
    built: list = []
    setup = threading.Thread(target=lambda: built.append(trainer_cls(config=config)))
    setup.start()
    return setup, built


class RecordsGateAtBuild(PPO):
    """PPO that records, when it starts building its learner, whether its actors' gate was open."""

    def build_policy(self, observation_space, action_space):
        self.gate_open_at_build = os.path.exists(os.path.join(self.cfg["env_config"]["dir"], "go"))
        return super().build_policy(observation_space, action_space)


def test_a_streaming_trainer_builds_its_learner_after_its_rollout_actors_are_up(tmp_path, monkeypatch):
    # On a few cores the learner's torch import and build would only slow the actors' boot, and
    # the streams sample while it builds: so it waits for them. Here the actors cannot be up
    # before the test sees both of them building and lets them go; torch is imported already, so
    # a learner that did not wait would build at once.
    import torch  # noqa: F401
    monkeypatch.setattr("algorithms.core.trainer.cores_here", lambda: 2)  # both actors start at once
    setup, built = start_held_setup(RecordsGateAtBuild, tmp_path, num_workers=2)
    while len(list(tmp_path.glob("building.*"))) < 2:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    setup.join()
    trainer = built[0]
    try:
        assert trainer.gate_open_at_build
        assert trainer.train()["env_steps_this_iter"] > 0
    finally:
        trainer.stop()


class ShowsItsGroup(PPO):
    """PPO that shows the test its worker group while its setup still runs."""

    groups: list = []

    def _worker_group(self, *args, **kwargs):
        group = super()._worker_group(*args, **kwargs)
        ShowsItsGroup.groups.append(group)
        return group


def test_streaming_rollout_actors_start_one_core_s_worth_at_a_time(tmp_path, monkeypatch):
    # A new actor's start is nearly a CPU-second: started all at once on a few cores, they would
    # all come up together at the end. With one core, each actor starts when the one before is up.
    monkeypatch.setattr("algorithms.core.trainer.cores_here", lambda: 1)
    monkeypatch.setattr(ShowsItsGroup, "groups", [])
    setup, built = start_held_setup(ShowsItsGroup, tmp_path, num_workers=3)
    for released in range(3):
        while not (held := [p for p in tmp_path.glob("building.*") if not (tmp_path / f"go.{p.suffix[1:]}").exists()]):
            time.sleep(0.01)
        group = ShowsItsGroup.groups[0]
        assert len(held) == 1 and group.started == released + 1  # the next starts once this one is up
        (tmp_path / f"go.{held[0].suffix[1:]}").touch()
    setup.join()
    trainer = built[0]
    try:
        assert len(trainer.workers.actors) == len(trainer.workers._streams) == 3  # each streams from its start
        assert trainer.train()["env_steps_this_iter"] > 0
    finally:
        trainer.stop()


def test_rollout_actors_not_up_when_the_wait_ends_start_as_the_streams_run():
    import numpy as np
    import ray

    from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
    from algorithms.sampling.worker_group import WorkerGroup

    policy_kwargs = {"obs_dim": 4, "action_space": gym.spaces.Discrete(2), "hidden_sizes": [8], "activation": "tanh"}
    weights = make_numpy_actor_critic(**policy_kwargs).get_weights()
    group = WorkerGroup(
        worker_kwargs={"env": "CartPole-v1", "env_config": {}, "num_envs": 1, "policy_factory": make_numpy_actor_critic,
                       "policy_kwargs": policy_kwargs, "seed": 0},
        num_workers=3, num_cpus_per_worker=0.25, local_policy=None, max_starting=1,
    )
    try:
        assert len(group.actors) == 1 and group._deferred == [2, 3]
        group.set_weights(lambda: weights)
        group.start_streams()
        group.wait_until_up(timeout_s=0.0)  # gives up at once: the others wait for the streams
        seen: set[int] = set()
        while seen != {1, 2, 3}:
            seen.update(int(f.worker_index) for f in group.stream(min_slots=16))
        assert sorted(group._streams) == [1, 2, 3] and not group._deferred
        assert all(np.all(f.weights_versions == 1) for f in group.stream(min_slots=16))
        assert ray.get(group.actors[3].ready.options(concurrency_group="control").remote())
    finally:
        group.stop()


@pytest.mark.parametrize("judged_short", [1.0, 1.15, 1.3])
def test_a_streamed_batch_is_approached_in_takes_that_stay_within_its_slack(judged_short):
    # The learner waits for a batch's steps judged from the streams' rate, which a few slow env
    # steps put off; a take that brings more than the batch's slack leaves the excess for the
    # next batch, where it is stale. Here the envs step ``judged_short`` times faster than judged
    # (every take brings that many times the steps waited for): one take aimed at the whole
    # batch overshoots its slack, takes aimed at part of what is lacking do not.
    from algorithms.sampling.stream_batches import BATCH_SLACK, aim

    min_slots, slots, takes = 2048, 0, 0
    while slots < min_slots:
        slots += round(aim(min_slots - slots, min_slots, actors=8) * judged_short)
        takes += 1
    assert min_slots <= slots <= min_slots * (1 + BATCH_SLACK)
    assert takes <= 4  # each take is a round of calls to every actor: a few, not one per step
    # a batch of a few steps (an off-policy trainer's round) is not worth a take per step
    assert [aim(need, 4, actors=2) for need in (4, 3, 1)] == [4, 3, 1]


def test_a_bounded_stream_waits_for_a_take_once_it_holds_max_ahead_steps():
    from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
    from algorithms.sampling.rollout_worker import RolloutWorker

    arrived, permits = threading.Semaphore(0), threading.Semaphore(0)
    policy_kwargs = {"obs_dim": 4, "action_space": gym.spaces.Discrete(2), "hidden_sizes": [8], "activation": "tanh"}
    worker = RolloutWorker(env=lambda config: CountedEnv(config), env_config={"arrived": arrived, "permits": permits},
                           num_envs=1, policy_factory=make_numpy_actor_critic, policy_kwargs=policy_kwargs, seed=0)
    weights = make_numpy_actor_critic(**policy_kwargs).get_weights()
    out = []
    streaming = threading.Thread(target=lambda: out.append(worker.stream(1, [weights], request=3, max_ahead=3)))
    streaming.start()
    for _ in range(5):  # permits for five steps: the bound lets three run
        permits.release()
    for _ in range(3):
        assert arrived.acquire(timeout=30)
    deadline = time.monotonic() + 30
    while worker.slots_sampled() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.slots_sampled() == 3
    assert not arrived.acquire(timeout=1.0), "a fourth step started while three waited untaken"
    worker.set_max_ahead(4)  # the learner moves the bound: one more step, with no take
    assert arrived.acquire(timeout=30)
    deadline = time.monotonic() + 30
    while worker.slots_sampled() < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not arrived.acquire(timeout=1.0), "a fifth step started while four waited untaken"
    assert worker.take().valid.shape == (4, 1)
    assert arrived.acquire(timeout=30)  # the take made room: the stream steps on
    worker.abort(3)
    for _ in range(3):
        permits.release()
    streaming.join(30)
    assert out == [None] and worker.slots_sampled() >= 5
