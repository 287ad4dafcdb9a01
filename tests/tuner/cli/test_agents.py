"""`tuner checkpoints`, `tuner fetch` and `tuner rollout`: a sweep's trained agents, listed, copied
and played from a folder that never ran the sweep (the store and the storage are all it needs),
with the checkpoints in the sweep's folder and in object storage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tuner.cli.conftest import cli
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")

PPO_CONFIG = {"env": "CartPole-v1", "train_batch_size": 256, "minibatch_size": 128, "num_epochs": 2,
              "num_envs_per_worker": 4, "seed": 0, "lr": tune.grid_search([1e-3, 3e-3])}


@pytest.fixture(params=["folder", "s3"])
def sweep(request, tmp_path_factory, monkeypatch):
    """A PPO sweep of 2 trials, 3 iterations, a checkpoint each, 2 kept; (its name, the flags and
    environment the verbs need from any folder)."""
    tmp = tmp_path_factory.mktemp("agents")
    env: dict[str, str] = {}
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        env = dict(server.env)
        storage = server.uri(tmp.name)
        url = request.getfixturevalue("postgres_url")
        flags = ["--database-url", url]
        for key, value in {**env, "TUNER_STORAGE_PATH": str(tmp / "local")}.items():
            monkeypatch.setenv(key, value)
    else:
        storage, url = str(tmp / "results"), None
        flags = ["--storage-path", storage]
    name = f"agents_{request.param}_{tmp.name[-6:]}"
    analysis = tune.run("PPO", config=PPO_CONFIG, stop={"training_iteration": 3}, checkpoint_freq=1,
                        keep_checkpoints_num=2, metric="episode_return_mean", mode="max", storage_path=storage,
                        database_url=url, name=name, verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 2
    best = analysis.get_best_checkpoint().path
    analysis.close()
    return name, flags, env, best, request.param


def test_the_best_agent_is_listed_fetched_and_played_from_a_fresh_folder(sweep, tmp_path):
    name, flags, env, best, kind = sweep
    fresh = tmp_path / "fresh"  # another user's folder: no run directory, another default storage path
    fresh.mkdir()
    env = {**env, "TUNER_STORAGE_PATH": str(fresh / "nothing_here")}
    listed = cli("checkpoints", name, *flags, **env)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert len(rows) == 4 and [row[-1] for row in rows if row[3] == "*"] == [best], listed.stdout
    assert all(row[-1].startswith("s3://") == (kind == "s3") for row in rows), rows
    fetched = cli("fetch", name, *flags, "-o", str(fresh / "agent"), **env)
    assert fetched.returncode == 0, fetched.stderr
    assert {"agent.json", "trainer_state.pt"} <= set(os.listdir(fresh / "agent"))
    played = cli("rollout", name, *flags, "--episodes", "3", "--seed", "7", "--video", str(fresh / "video"), **env)
    assert played.returncode == 0, played.stderr
    assert "3 episodes from env seed 7: return " in played.stdout and best in played.stdout, played.stdout
    assert sorted(os.listdir(fresh / "video")) == [f"episode_{i}.mp4" for i in range(3)]
    again = cli("rollout", name, *flags, "--episodes", "3", "--seed", "7", **env)  # deterministic
    assert again.stdout.splitlines()[1] == played.stdout.splitlines()[1]


def test_agent_verbs_say_in_one_line_what_is_missing(tmp_path):
    storage = tmp_path / "results"

    def quick(config):
        tune.report({"score": 1.0})

    tune.run(quick, storage_path=str(storage), name="nockpt", metric="score", mode="max", verbose=0,
             resources_per_trial={"cpu": 0.5}).close()
    for argv in (["rollout", "nockpt"], ["fetch", "nockpt", "-o", str(tmp_path / "out")]):
        proc = cli(*argv, "--storage-path", str(storage))
        assert proc.returncode == 1 and proc.stderr == (
            "tuner: error: sweep 'nockpt' has no checkpoints (its trials saved none: set checkpoint_freq, "
            "checkpoint_at_end, or report a checkpoint)\n"), proc.stderr
    proc = cli("rollout", "nockpt", "--storage-path", str(storage), "--episodes", "0")
    assert proc.returncode == 2 and proc.stderr == "tuner: error: --episodes: must be an int >= 1, got 0\n"
    assert not Path(tmp_path / "out").exists()
