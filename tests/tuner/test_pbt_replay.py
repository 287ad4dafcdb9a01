"""A real PBT sweep, then a replay of one of its trials: the replayed trial trains with exactly the
configs the stored trial's final weights were trained with, step by step."""

from __future__ import annotations

import json
import os

import pytest

from schedulers import PopulationBasedTraining, PopulationBasedTrainingReplay
from schedulers.pbt_replay import read_policy_file
from tuner import export_pbt_policy, tune
from tuner.pbt_policy import stored_policy

pytestmark = pytest.mark.usefixtures("ray_session")

ITERATIONS = 12


class Lineage(tune.Trainable):
    """Its weights are the list of the ``h`` each step was trained with (kept across checkpoints)."""

    def setup(self, config):
        self.history = []

    def step(self):
        self.history.append(self.config["h"])
        # The best h moves with the steps (0.05 per step): PBT has something to follow.
        score = sum(1.0 - (h - 0.05 * (i + 1)) ** 2 for i, h in enumerate(self.history))
        return {"score": score, "h": self.config["h"], "age": len(self.history)}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "history.json"), "w") as f:
            json.dump(self.history, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "history.json")) as f:
            self.history = json.load(f)

    def reset_config(self, new_config):
        self.config = dict(new_config)
        return True


def _history(trial):
    with open(os.path.join(trial.checkpoint_path, "history.json")) as f:
        return json.load(f)


def _pbt_sweep(tmp_path, name, database_url=None):
    """Four trials, two at a time: a paused trial takes its donor's latest checkpoint when it
    restarts, often a later one than its own iteration, so lineages run ahead of iteration counts."""
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                  hyperparam_mutations={"h": tune.uniform(0.0, 1.0)}, quantile_fraction=0.5,
                                  resample_probability=0.5, synch=True, seed=0)
    return tune.run(Lineage, config={"h": tune.grid_search([0.0, 0.2, 0.5, 0.9])}, scheduler=pbt,
                    metric="score", mode="max", stop={"training_iteration": ITERATIONS}, checkpoint_at_end=True,
                    max_concurrent_trials=2, resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path),
                    name=name, database_url=database_url, verbose=0)


def _per_step(policy, steps):
    """The h each step of the policy trains with (step i with the config of once i - 1 was reported)."""
    return [policy.config_at(i)["h"] for i in range(steps)]


@pytest.fixture(scope="module")
def pbt_sqlite(tmp_path_factory, ray_session):
    """One PBT sweep on SQLite for the tests of this module that read it."""
    return _pbt_sweep(tmp_path_factory.mktemp("pbt"), "pbt")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_stored_schedule_is_the_one_the_final_weights_were_trained_with(tmp_path, request, backend):
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else None
    analysis = request.getfixturevalue("pbt_sqlite") if url is None else _pbt_sweep(tmp_path, "pbt", database_url=url)
    exploited = {row["trial_id"] for row in analysis.exploits}
    assert exploited, "PBT made no exploit"
    for trial in analysis.trials:
        if trial.trial_id not in exploited:
            continue
        history = _history(trial)  # what its weights were trained with, step by step
        policy = stored_policy(analysis.experiment_path, trial.trial_id, database_url=url)
        assert _per_step(policy, len(history)) == history, trial.trial_id
    never = [t for t in analysis.trials if t.trial_id not in exploited]
    if never:
        with pytest.raises(ValueError, match="trial_id .* never exploited"):
            PopulationBasedTrainingReplay(analysis.experiment_path, trial_id=never[0].trial_id, database_url=url)
    with pytest.raises(ValueError, match="trial_id 'nope' is not a trial of sweep"):
        PopulationBasedTrainingReplay(analysis.experiment_path, trial_id="nope", database_url=url)
    # No such sweep in the database; without one, a directory that holds no store.
    missing = tmp_path / "no_such_sweep" if url else tmp_path
    with pytest.raises(ValueError, match="policy_file .* is no stored sweep"):
        PopulationBasedTrainingReplay(missing, trial_id="x", database_url=url)


def test_a_replayed_trial_trains_with_the_stored_trials_configs(tmp_path, pbt_sqlite):
    analysis = pbt_sqlite
    exploited = {row["trial_id"] for row in analysis.exploits}
    assert exploited, "PBT made no exploit"
    # The trial whose final weights come down the longest lineage of exploits.
    policies = {t.trial_id: stored_policy(analysis.experiment_path, t.trial_id) for t in analysis.trials
                if t.trial_id in exploited}
    source = max((t for t in analysis.trials if t.trial_id in exploited),
                 key=lambda t: (len(policies[t.trial_id].changes), len(_history(t))))
    history = _history(source)
    replay = PopulationBasedTrainingReplay(analysis.experiment_path, trial_id=source.trial_id)
    assert replay.policy == policies[source.trial_id] and replay.policy.changes, replay.policy
    print(f"replaying {source.trial_id}: {len(history)} steps of weights ({ITERATIONS} iterations of its own), "
          f"changes at {[at for at, _ in replay.policy.changes]}")

    replayed = tune.run(Lineage, scheduler=replay, stop={"training_iteration": len(history)}, checkpoint_at_end=True,
                        resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="replay", verbose=0)
    (trial,) = replayed.trials
    frame = replayed.trial_dataframes[trial.trial_id]
    assert list(frame["training_iteration"]) == list(range(1, len(history) + 1))
    assert list(frame["h"]) == history  # the config at each step is the stored schedule's
    assert list(frame["age"]) == list(range(1, len(history) + 1))  # its own weights throughout, none taken
    assert _history(trial) == history
    # Each change was made on the trial's own checkpoint (recorded like an exploit, itself the donor).
    # A change to the config the trial already has (PBT multiplying h = 0.0) needs no restart and
    # is not made, nor one at the last step (the stop comes first: no step would train with it):
    # the replay records the others.
    effective, current = [], replay.policy.initial_config
    for at, config in replay.policy.changes:
        if config != current and at < len(history):
            effective.append(at)
        current = config
    changes = replayed.exploits
    assert all(row["donor_trial_id"] == trial.trial_id for row in changes)
    assert [row["iteration"] for row in changes] == effective
    assert all(os.path.dirname(row["checkpoint_path"]) == trial.trial_dir for row in changes)
    # The replay is itself a stored schedule: the same configs step by step.
    again = stored_policy(replayed.experiment_path, trial.trial_id)
    assert _per_step(again, len(history)) == _per_step(replay.policy, len(history)) == history

    # Exported as a Ray Tune policy file: read back by ours and by Ray Tune's own reader alike.
    from ray.tune.schedulers.pbt import PopulationBasedTrainingReplay as RayReplay

    path = export_pbt_policy(analysis.experiment_path, source.trial_id)
    assert path.name == f"pbt_policy_{source.trial_id}.txt"
    assert read_policy_file(path) == replay.policy
    initial, changes = RayReplay._load_policy(None, str(path))
    assert initial == replay.policy.initial_config and [tuple(c) for c in changes] == list(replay.policy.changes)


SCHEDULE = [["t1", "t0", 2, 2, {"h": 0.1}, {"h": 0.4}], ["t2", "t1", 4, 5, {"h": 0.4}, {"h": 0.7}]]
EXPECTED = [0.1, 0.1, 0.4, 0.4, 0.4, 0.7, 0.7, 0.7]  # the h of steps 1..8


def _policy_file(tmp_path):
    path = tmp_path / "pbt_policy_t2.txt"
    path.write_text("".join(json.dumps(r) + "\n" for r in SCHEDULE))
    return path


class InterruptAt(tune.Callback):
    """Ctrl-C in the driver once a trial reported ``iteration``."""

    def __init__(self, iteration):
        self.iteration = iteration

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["training_iteration"] == self.iteration:
            raise KeyboardInterrupt


def test_an_interrupted_replay_resumes_on_schedule(tmp_path):
    def run(**kwargs):
        return tune.run(Lineage, scheduler=PopulationBasedTrainingReplay(_policy_file(tmp_path)),
                        stop={"training_iteration": len(EXPECTED)}, checkpoint_freq=1, checkpoint_at_end=True,
                        resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="replay", verbose=0,
                        **kwargs)

    with pytest.raises(KeyboardInterrupt):
        run(callbacks=[InterruptAt(4)])  # after the first change, before the second
    analysis = run(resume=True)
    (trial,) = analysis.trials
    assert list(analysis.trial_dataframes[trial.trial_id]["h"]) == EXPECTED
    assert _history(trial) == EXPECTED
    assert [(r["iteration"], r["new_config"]) for r in analysis.exploits] == [(2, {"h": 0.4}), (5, {"h": 0.7})]


def checkpointing_function(config):
    """A function trainable whose weights are the h of its steps, checkpointed every step."""
    checkpoint = tune.get_checkpoint()
    history = []
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "history.json")) as f:
            history = json.load(f)
    while True:
        history.append(config["h"])
        directory = os.path.join(tune.get_context().get_trial_dir(), f"step_{len(history)}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "history.json"), "w") as f:
            json.dump(history, f)
        tune.report({"h": config["h"], "age": len(history)}, checkpoint=tune.Checkpoint.from_directory(directory))


def silent_function(config):
    for step in range(1, len(EXPECTED) + 1):
        tune.report({"h": config["h"], "age": step})  # no checkpoint: it cannot be paused to switch


def test_a_function_trainable_switches_on_its_reported_checkpoints(tmp_path, caplog):
    analysis = tune.run(checkpointing_function, scheduler=PopulationBasedTrainingReplay(_policy_file(tmp_path)),
                        stop={"training_iteration": len(EXPECTED)}, resources_per_trial={"cpu": 0.5},
                        storage_path=str(tmp_path), name="function", verbose=0)
    frame = analysis.trial_dataframes[analysis.trials[0].trial_id]
    assert list(frame["h"]) == EXPECTED and list(frame["age"]) == list(range(1, len(EXPECTED) + 1))

    silent = tune.run(silent_function, scheduler=PopulationBasedTrainingReplay(_policy_file(tmp_path)),
                      resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="silent", verbose=0)
    frame = silent.trial_dataframes[silent.trials[0].trial_id]
    assert list(frame["h"]) == [0.1] * len(EXPECTED)  # it keeps its first config, with a warning per change
    assert caplog.text.count("cannot change trial") == 2 and not silent.exploits
