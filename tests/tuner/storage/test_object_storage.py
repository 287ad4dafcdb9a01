"""A sweep whose storage_path is an object store (a real S3 server, SeaweedFS): each trial's
node writes its checkpoints there, and restores, restarts and retention go through it."""

from __future__ import annotations

import json
import os

import pyarrow.fs as pafs
import pytest

from tests.tuner.cli.cli_trainables import fails_once
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.fixture
def s3_env(s3_server, monkeypatch, tmp_path):
    """The driver's environment reaches the S3 server; the local folder of sweeps is the test's."""
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TUNER_STORAGE_PATH", str(tmp_path / "local"))
    return s3_server


def _objects(server, prefix: str) -> list[str]:
    listed = server.filesystem().get_file_info(pafs.FileSelector(f"{server.bucket}/{prefix}", allow_not_found=True,
                                                                 recursive=True))
    return sorted(i.path.split(f"{server.bucket}/{prefix}/", 1)[1] for i in listed if i.type == pafs.FileType.File)


def test_checkpoints_go_to_the_bucket_and_a_restarted_trial_restores_from_it(s3_env, tmp_path):
    storage = s3_env.uri("restart")
    analysis = tune.run(fails_once, config={"fail_once": str(tmp_path / "failed")}, storage_path=storage, name="restart",
                        max_failures=1, checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                        resources_per_trial={"cpu": 0.5}, verbose=0)
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["training_iteration"] == 6 and trial.last_result["resumed_from"] == 3
    assert trial.checkpoint.path == f"{storage}/restart/fails_once_{trial.trial_id}/checkpoint_000006"
    kept = {name.split("/")[0] for name in _objects(s3_env, f"restart/restart/fails_once_{trial.trial_id}")}
    assert kept == {"checkpoint_000005", "checkpoint_000006"}, kept  # num_to_keep deleted the others there
    local = tmp_path / "local" / "restart" / f"fails_once_{trial.trial_id}"
    assert not list(local.glob("checkpoint_*")), list(local.iterdir())  # nothing left on the node's disk
    with trial.checkpoint.as_directory() as folder:
        assert json.loads(open(os.path.join(folder, "state.json")).read()) == {"i": 6}
    analysis.close()


@pytest.mark.parametrize("case", ["no bucket", "bad key", "no server", "unknown scheme"])
def test_an_object_store_that_cannot_be_used_is_one_line_naming_storage_path_and_nothing_is_written(
        case, s3_env, tmp_path, monkeypatch):
    storage = s3_env.uri("bad")
    if case == "no bucket":
        storage = "s3://no-such-bucket-here/x"
        said = "the bucket 'no-such-bucket-here' does not exist"
    elif case == "bad key":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        said = "ACCESS_DENIED"
    elif case == "no server":
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        said = "Could not connect"
    else:
        storage = "nosuchscheme://bucket/x"
        said = "which no filesystem here opens"
    with pytest.raises(ValueError) as info:
        tune.run(fails_once, storage_path=storage, name="bad", verbose=0)
    line = str(info.value)
    assert line.startswith("storage_path: ") and said in line and "\n" not in line, line
    assert not (tmp_path / "local" / "bad").exists()


def test_a_sweep_resumes_on_a_machine_without_its_folder_from_the_bucket(s3_env, tmp_path, postgres_url):
    """A shared store (PostgreSQL) and object storage: every local folder of the sweep wiped, a
    resume elsewhere continues the failed trial from its checkpoint in the bucket."""
    import shutil

    kwargs = dict(config={"fail_once": str(tmp_path / "failed")}, storage_path=s3_env.uri("moved"), name="moved",
                  database_url=postgres_url, resources_per_trial={"cpu": 0.5}, verbose=0, raise_on_failed_trial=False)
    first = tune.run(fails_once, **kwargs)
    assert first.trials[0].status == "ERROR"
    first.close()
    shutil.rmtree(tmp_path / "local")  # this machine's folder of the sweep (its logs, its spec) is gone
    again = tune.run(fails_once, resume="ERRORED_ONLY", **kwargs)
    (trial,) = again.trials
    assert trial.status == "TERMINATED", trial.error
    assert trial.last_result["training_iteration"] == 6 and trial.last_result["resumed_from"] == 3
    again.close()


def test_tuner_sweep_and_resume_put_the_spec_and_checkpoints_in_the_bucket(s3_env, tmp_path):
    """The trial fails at iteration 4 the first time; `tuner resume --errored-only` goes on from
    its checkpoint in the bucket and puts the next ones there too (not in the local folder)."""
    import ray

    from tests.tuner.cli.conftest import cli

    ray_address = ray.get_runtime_context().gcs_address
    spec = tmp_path / "spec.yaml"
    spec.write_text("trainable: tests.tuner.cli.cli_trainables:fails_once\nmetric: score\nmode: max\n"
                    f"resources: {{cpu: 0.5}}\nconfig: {{iterations: 6, fail_once: {tmp_path / 'failed'}}}\n")
    env = {**s3_env.env, "TUNER_STORAGE_PATH": str(tmp_path / "local")}
    proc = cli("sweep", str(spec), "--name", "bucketed", "--address", ray_address, "--progress", "none",
               "--set", f"storage_path={s3_env.uri('cli')}", **env)
    assert proc.returncode == 1 and "1 trial(s) failed" in proc.stderr, proc.stdout + proc.stderr
    failed = cli("show", "bucketed", **env)  # the trial's error, as stored
    assert "failed once" in failed.stdout, failed.stdout + failed.stderr
    stored = _objects(s3_env, "cli/bucketed")
    assert "sweep.yaml" in stored and any(name.endswith("/checkpoint_000003/state.json") for name in stored), stored
    resumed = cli("resume", "bucketed", "--errored-only", "--address", ray_address, "--progress", "none", **env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    stored = _objects(s3_env, "cli/bucketed")
    assert any(name.endswith("/checkpoint_000006/state.json") for name in stored), stored
    assert not list((tmp_path / "local" / "bucketed").glob("*/checkpoint_*")), "a checkpoint stayed local"
    shown = cli("show", "bucketed", **env)  # its store and logs stay in this machine's folder
    assert shown.returncode == 0 and "TERMINATED" in shown.stdout, shown.stdout + shown.stderr


def test_a_checkpoint_that_cannot_be_fetched_is_one_line_naming_the_trial_and_the_checkpoint(s3_env, tmp_path):
    from tuner.storage import open_storage
    from tuner.storage.checkpoints import fetch_checkpoint
    from tuner.trainable.context import TrialInfo

    storage = open_storage(s3_env.uri("gone"))
    info = TrialInfo(trial_id="t1", trial_name="PPO_t1", trial_dir=str(tmp_path / "trial"), experiment_name="gone",
                     storage=storage, storage_dir=storage.join("gone", "PPO_t1"))
    missing = storage.join("gone", "PPO_t1", "checkpoint_000004")
    with pytest.raises(FileNotFoundError) as info_error:
        fetch_checkpoint(missing, info)
    assert str(info_error.value) == f"trial PPO_t1: cannot fetch its checkpoint {missing}: no checkpoint at {missing}"


class CountsAndMarks(tune.Trainable):
    """Counts its iterations; each leaves a file named after it (the event the gate waits for)."""

    def setup(self, config):
        self.count = 0

    def step(self):
        self.count += 1
        open(os.path.join(self.config["marks"], f"trained_{self.count}"), "w").close()
        return {"count": self.count}

    def save_checkpoint(self, checkpoint_dir):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]


def test_a_checkpoint_uploads_while_the_next_iteration_runs_and_is_recorded_once_it_is_there(tmp_path, monkeypatch):
    """The upload of iteration 1's checkpoint waits until iteration 3 has trained: a trial that
    waited for its uploads before going on would never get there (the upload gives up, the trial
    errors). Every checkpoint ends up recorded, each with its own iteration, and in the storage."""
    from tests.tuner.storage.gated_filesystem import GatedFileSystem

    monkeypatch.setenv("TUNER_STORAGE_PATH", str(tmp_path / "local"))
    marks = tmp_path / "marks"
    marks.mkdir()
    bucket = tmp_path / "bucket"
    filesystem = GatedFileSystem(gated="checkpoint_000001", gate=str(marks / "trained_3"))
    analysis = tune.run(CountsAndMarks, config={"marks": str(marks)}, stop={"training_iteration": 4},
                        checkpoint_freq=1, storage_path=str(bucket), storage_filesystem=filesystem, name="gated",
                        resources_per_trial={"cpu": 0.5}, verbose=0)
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED", trial.error
    recorded = analysis.checkpoints(trial.trial_id)
    assert sorted((row["path"].rsplit("/", 1)[-1], row["iteration"], row["metrics"]["count"]) for row in recorded) == [
        ("checkpoint_000001", 1, 1), ("checkpoint_000002", 2, 2), ("checkpoint_000003", 3, 3),
        ("checkpoint_000004", 4, 4)]
    assert trial.checkpoint.path.endswith("checkpoint_000004")
    for row in recorded:  # in the storage, each in a folder of its own
        assert row["path"].startswith(str(bucket).lstrip("/")) or str(bucket) in row["path"], row["path"]
        assert list(bucket.rglob(row["path"].rsplit("/", 1)[-1])), row["path"]
