"""PopulationBasedTrainingReplay without Ray: policy files read as Ray Tune reads them, the lineage
of stored exploits, the scheduler's decisions on the simulator, its argument errors."""

from __future__ import annotations

import json
import logging

import pytest

from schedulers import PopulationBasedTrainingReplay
from schedulers.pbt_replay import PBTPolicy, read_policy_file
from schedulers.simulator import Simulator
from tuner.pbt_policy import policy_records

A, B, C = {"lr": 0.1}, {"lr": 0.2}, {"lr": 0.3}

POLICY_FILES = {
    "one exploit": [["t1", "t0", 4, 4, A, B]],
    # t2 took t1's weights, which t1 had taken from t0: one chain of three configs.
    "chain": [["t1", "t0", 2, 3, A, B], ["t2", "t1", 5, 6, B, C]],
    # t2's own earlier exploit was overwritten by its later one from t0 (whose file did not exist):
    "broken chain": [["t2", "t1", 2, 2, A, B], ["t2", "t0", 6, 5, C, A]],
    "empty": [],
}


def _write(tmp_path, records, name="pbt_policy_t2.txt"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("records", POLICY_FILES.values(), ids=POLICY_FILES.keys())
def test_policy_files_read_as_ray_tune_reads_them(tmp_path, records):
    from ray.tune.schedulers.pbt import PopulationBasedTrainingReplay as RayReplay

    path = _write(tmp_path, records)
    ours = read_policy_file(path)
    initial, policy = RayReplay._load_policy(None, str(path))  # Ray Tune's reading, which uses no state
    assert ours.initial_config == initial
    assert [list(change) for change in ours.changes] == [list(change) for change in policy]


def test_the_config_of_each_step():
    policy = PBTPolicy(A, ((3, B), (6, C)))
    assert [policy.config_at(step) for step in range(0, 8)] == [A, A, A, B, B, B, C, C]


def test_bad_arguments_name_the_argument(tmp_path):
    good = _write(tmp_path, POLICY_FILES["chain"])
    for bad in (None, 3, b"x", ""):
        with pytest.raises(ValueError, match="policy_file"):
            PopulationBasedTrainingReplay(bad)
    with pytest.raises(ValueError, match="policy_file .* neither a policy file nor a sweep"):
        PopulationBasedTrainingReplay(tmp_path / "missing.txt")
    for bad in (3, "", ["t"]):
        with pytest.raises(ValueError, match="trial_id"):
            PopulationBasedTrainingReplay(good, trial_id=bad)
    with pytest.raises(ValueError, match="trial_id='t2' is only for a stored sweep"):
        PopulationBasedTrainingReplay(good, trial_id="t2")
    with pytest.raises(ValueError, match="database_url"):
        PopulationBasedTrainingReplay(good, database_url=5)
    with pytest.raises(ValueError, match="trial_id is required"):
        PopulationBasedTrainingReplay(tmp_path)
    garbled = tmp_path / "garbled.txt"
    garbled.write_text('["t1", "t0", 4, 4, {"lr": 0.1}, {"lr": 0.2}]\nnot json\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        PopulationBasedTrainingReplay(garbled)
    short = _write(tmp_path, [["t1", "t0", 4, {"lr": 0.1}]], "short.txt")
    with pytest.raises(ValueError, match="6 values"):
        PopulationBasedTrainingReplay(short)


def test_the_simulated_trial_follows_the_schedule_and_keeps_its_position(tmp_path, caplog):
    replay = PopulationBasedTrainingReplay(_write(tmp_path, POLICY_FILES["chain"]))
    trained = []  # (position, lr) of every step, as the model saw it

    def curve(config, position):
        trained.append((position, config["lr"]))
        return -position

    with caplog.at_level(logging.WARNING):
        result = Simulator(replay, curve, configs=[{"lr": 9.0}], max_iterations=8).run()
    assert "replaced by the schedule's initial config" in caplog.text  # Ray Tune warns too
    assert trained == [(1, 0.1), (2, 0.1), (3, 0.1), (4, 0.2), (5, 0.2), (6, 0.2), (7, 0.3), (8, 0.3)]
    # Each change: a checkpoint of its own, then an exploit of itself (its own weights), then a pause.
    exploits = [(e.time, e.detail) for e in result.exploits]
    assert exploits == [(3, ("trial_00000", B)), (6, ("trial_00000", C))]
    assert [d for _, t, d in result.decisions if t in (3, 6)] == ["PAUSE", "PAUSE"]


def test_a_second_trial_is_refused(tmp_path):
    replay = PopulationBasedTrainingReplay(_write(tmp_path, POLICY_FILES["one exploit"]))
    with pytest.raises(ValueError, match="num_samples=1"):
        Simulator(replay, lambda config, t: 0.0, configs=[{}, {}], max_iterations=5).run()


def test_an_empty_policy_keeps_the_trials_config_or_needs_one(tmp_path):
    empty = _write(tmp_path, [])
    trained = []
    Simulator(PopulationBasedTrainingReplay(empty), lambda config, t: trained.append(config["lr"]) or 0.0,
              configs=[{"lr": 0.5}], max_iterations=3).run()
    assert trained == [0.5] * 3
    with pytest.raises(ValueError, match="holds no config"):
        Simulator(PopulationBasedTrainingReplay(empty), lambda config, t: 0.0, configs=[{}], max_iterations=3).run()


def _exploit(trial, donor, iteration, old, new, path, timestamp=0.0):
    return {"trial_id": trial, "donor_trial_id": donor, "iteration": iteration, "old_config": old,
            "new_config": new, "checkpoint_path": path, "timestamp": timestamp}


def test_stored_exploits_are_followed_back_through_the_weights_lineage():
    """Trials keep their own iteration count across an exploit; the schedule counts the steps of
    the weights, following each restored checkpoint to the trial and iteration that saved it."""
    initial = {"a": {"h": 1}, "b": {"h": 2}, "c": {"h": 3}, "d": {"h": 4}}
    checkpoints = [{"trial_id": "a", "path": "/a5", "iteration": 5}, {"trial_id": "b", "path": "/b8", "iteration": 8},
                   {"trial_id": "c", "path": "/c7", "iteration": 7}]
    exploits = [
        _exploit("b", "a", 4, {"h": 2}, {"h": 10}, "/a5"),  # b at its 4 takes a's weights of 5 steps
        _exploit("a", "c", 5, {"h": 1}, {"h": 40}, "/c7"),  # after a saved /a5: not in /a5's lineage
        _exploit("c", "b", 6, {"h": 3}, {"h": 20}, "/b8"),  # b's weights at its 8: 5 + (8 - 4) = 9 steps
        _exploit("d", "c", 7, {"h": 4}, {"h": 30}, "/b8"),  # c had saved nothing since: still b's /b8
    ]

    def records(trial):
        return policy_records(trial, initial_configs=initial, exploits=exploits, checkpoints=checkpoints)

    b_record = ["b", "a", 4, 5, {"h": 1}, {"h": 10}]
    assert records("b") == [b_record]
    assert records("c") == [b_record, ["c", "b", 6, 9, {"h": 10}, {"h": 20}]]
    assert records("d") == [b_record, ["d", "b", 7, 9, {"h": 10}, {"h": 30}]]
    # a took c's weights of c's iteration 7: b's 9 steps, then one of c's own.
    assert records("a") == [b_record, ["c", "b", 6, 9, {"h": 10}, {"h": 20}], ["a", "c", 5, 10, {"h": 20}, {"h": 40}]]
    # A donor checkpoint the checkpoints table lacks is dated by the donor's last result before the exploit.
    undated = [_exploit("b", "a", 4, {"h": 2}, {"h": 10}, "/gone", timestamp=10.0)]
    results = {"a": [{"training_iteration": i, "timestamp": float(i * 3)} for i in range(1, 6)]}
    assert policy_records("b", initial_configs=initial, exploits=undated, checkpoints=[], results=results) == [
        ["b", "a", 4, 3, {"h": 1}, {"h": 10}]]


def test_docstring_examples():
    import doctest

    import schedulers.pbt_replay

    failures, tried = doctest.testmod(schedulers.pbt_replay)
    assert failures == 0 and tried > 0
