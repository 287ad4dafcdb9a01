"""`tuner submit` against a real local Ray cluster (`ray start --head` with its Jobs API and token
authentication) and the local PostgreSQL: the submitting process returns at once, the sweep runs
on the cluster, and fresh processes follow, stop and resume it through the shared store."""

from __future__ import annotations

import shlex
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa

from tests.tuner.cli.cluster import free_port, start_cluster
from tests.tuner.cli.conftest import cli_in

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.cluster]

SLOW_TRAIN = '''\
import json, os, time
from tuner import tune


def train(config):
    """``iterations`` results of x * i, a checkpoint with each; goes on from its checkpoint. With
    ``release`` set it holds after its 3rd result until that file exists (2 minutes at most)."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"]
    for i in range(start + 1, config["iterations"] + 1):
        if i == 4 and config.get("release"):
            deadline = time.monotonic() + 120
            while not os.path.exists(config["release"]) and time.monotonic() < deadline:
                time.sleep(0.02)
        time.sleep(config["sleep"])
        directory = os.path.join(tune.get_context().get_trial_dir(), f"checkpoint_{i:04d}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"i": i}, f)
        tune.report({"score": config["x"] * i}, checkpoint=tune.Checkpoint.from_directory(directory))
'''

SLOW_SPEC = """\
trainable: slowtrain:train
metric: score
mode: max
resources: {cpu: 0.5}
config:
  x: {grid_search: [1.0, 2.0]}
  iterations: ITERATIONS
  sleep: 0.1
"""

PPO_SPEC = """\
trainable: PPO
metric: episode_return_mean
mode: max
stop: {env_steps_total: 2048}
config:
  env: CartPole-v1
  seed: 0
  lr: {grid_search: [0.001, 0.003]}
  num_workers: 2
  num_cpus_for_learner: 0.5
  num_cpus_per_worker: 0.25
  train_batch_size: 512
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    left = cluster.stop()
    assert not left, f"processes outlived the cluster: {left}"


@pytest.fixture
def workdir(tmp_path, postgres_url, monkeypatch):
    """A user's directory with their trainable module, the shared store in $TUNER_DATABASE_URL."""
    (tmp_path / "slowtrain.py").write_text(SLOW_TRAIN)
    monkeypatch.setenv("TUNER_DATABASE_URL", postgres_url)
    return tmp_path


def tuner(workdir: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`tuner ARGS` from the user's directory (``cli_in``: the verbs that read the store or call the
    Jobs API run in this process); a sweep submitted from there keeps its run directory
    (checkpoints, logs) in the test's own folder on the cluster."""
    if args[:1] == ("submit",):
        args = (*args, "--storage-path", str(workdir / "cluster_results"))
    return cli_in(workdir, args, timeout=timeout, env=env, sweeps_here=False)


def spec(workdir: Path, text: str, name: str = "spec.yaml") -> str:
    (workdir / name).write_text(text)
    return name


def ls_row(workdir: Path, name: str, **env: str) -> list[str]:
    proc = tuner(workdir, "ls", **env)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    return next((row for row in rows if row[0] == name), [])


def wait_for(condition, what: str, timeout: float = 240, explain=None) -> None:
    """Poll ``condition`` until it holds; past ``timeout`` fail, with what ``explain()`` says."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}" + (f": {explain()}" if explain else "")
        time.sleep(0.5)


def results(url: str, name: str) -> list[tuple[str, int]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(
                "SELECT r.trial_id, r.iteration FROM results r JOIN experiments e ON e.id = r.experiment_id "
                "WHERE e.name = :n ORDER BY r.trial_id, r.iteration"), {"n": name})]
    except sa.exc.ProgrammingError:  # no tables yet
        return []
    finally:
        engine.dispose()


def test_a_submitted_ppo_sweep_finishes_on_the_cluster_and_any_process_sees_it(cluster, workdir):
    proc = tuner(workdir, "submit", spec(workdir, PPO_SPEC), "--name", "ppo", "--address", cluster.address)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the submitting process is gone from here on
    assert "submitted sweep ppo as Ray Job tuner-ppo-" in proc.stdout and proc.stderr == "", proc.stderr
    job_id = proc.stdout.split("as Ray Job ")[1].split()[0]
    wait_for(lambda: ls_row(workdir, "ppo")[1:2] == ["TERMINATED"], "the PPO sweep to finish",
             explain=lambda: _logs(workdir, "ppo"))
    row = ls_row(workdir, "ppo")
    assert row[2] == cli_owner() and row[3] == job_id and row[4] == "2/2", row
    best = tuner(workdir, "best", "ppo")
    assert best.returncode == 0 and "episode_return_mean=" in best.stdout, best.stdout + best.stderr
    logs = tuner(workdir, "logs", "ppo")
    assert logs.returncode == 0 and "sweep ppo: 2 trials (2 TERMINATED)" in logs.stdout, logs.stdout + logs.stderr
    followed = tuner(workdir, "logs", "ppo", "-f")  # to the job's end: its output, and nothing of Ray's
    assert followed.returncode == 0 and followed.stdout == logs.stdout and followed.stderr == "", followed.stderr
    jobs_before = _job_count(cluster.address)
    again = tuner(workdir, "resume", "ppo", "--submit")
    assert again.returncode == 0 and again.stdout == (
        "sweep ppo is finished (2 trials, TERMINATED): nothing to resume, nothing submitted\n"), again.stdout + again.stderr
    assert _job_count(cluster.address) == jobs_before


def _logs(workdir: Path, name: str, *flags: str) -> str:
    proc = tuner(workdir, "logs", name, *flags)
    return (proc.stdout + proc.stderr)[-3000:]


def cli_owner() -> str:
    import getpass
    import socket

    return f"{getpass.getuser()}@{socket.gethostname()}"


def test_every_printed_verb_works_the_moment_submit_returns(cluster, workdir, postgres_url):
    """The sweep is in its store (SUBMITTED, its job, who, the trials it plans) before submit returns:
    a sweep submitted by mistake is stopped at once, and a job stopped before its driver took the
    sweep over leaves no sweep behind."""
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "200").replace("[1.0, 2.0]", "[1.0, 2.0, 3.0]"))
    proc = tuner(workdir, "submit", name, "--name", "mistake", "--address", cluster.address)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = proc.stdout.split("as Ray Job ")[1].split()[0]
    row = ls_row(workdir, "mistake")
    assert row[1] in ("SUBMITTED", "RUNNING") and row[2] == cli_owner() and row[3] == job_id, row
    assert row[4].endswith("/3"), row  # three trials planned, whether or not they started
    for verb in ("show", "logs"):
        done = tuner(workdir, verb, "mistake")
        assert done.returncode == 0, (verb, done.stdout + done.stderr)
    stop = tuner(workdir, "stop", "mistake")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    row = ls_row(workdir, "mistake")
    if "before its driver started" in stop.stdout:
        assert row == [] and "nothing ran, and it is no longer stored" in stop.stdout, (row, stop.stdout)
    else:
        assert row[1] == "INTERRUPTED" and "the sweep is INTERRUPTED" in stop.stdout, (row, stop.stdout)


def test_stop_then_resume_submit_completes_every_trial_with_no_result_lost_or_twice(cluster, workdir, postgres_url):
    """Every command is run as `tuner submit` printed it, with no $TUNER_DATABASE_URL (the URL is
    printed), and the resume from a folder without the trainable's module or the cluster's address:
    the store keeps both."""
    release = workdir / "release"  # both trials hold after 3 results until it exists
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "40") + f"  release: {release}\n")
    no_env = {"TUNER_DATABASE_URL": ""}
    proc = tuner(workdir, "submit", name, "--name", "stopped", "--address", cluster.address,
                 "--database-url", postgres_url, **no_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = {line.split(":", 1)[0].strip(): line.split(":", 1)[1] for line in proc.stdout.splitlines()[1:]}
    stop_command = printed["stop it"].split("(resumable: ")[0].strip()
    resume_command = printed["stop it"].split("(resumable: ")[1].rstrip(")").strip()
    assert f"--database-url {shlex.quote(postgres_url)}" in stop_command and "URL " not in stop_command, stop_command
    wait_for(lambda: len(results(postgres_url, "stopped")) == 6, "both trials to hold")
    again = tuner(workdir, "submit", name, "--name", "stopped", "--address", cluster.address)
    assert again.returncode == 3 and again.stderr.startswith("tuner: error: sweep 'stopped' is running as job"), \
        again.stderr
    stop = tuner(workdir, *shlex.split(stop_command)[1:], **no_env)
    assert stop.returncode == 0 and "the sweep is INTERRUPTED" in stop.stdout, stop.stdout + stop.stderr
    assert ls_row(workdir, "stopped")[1] == "INTERRUPTED"
    assert len(results(postgres_url, "stopped")) == 6
    release.touch()
    elsewhere = workdir / "elsewhere"  # no slowtrain.py here, and no --address given
    elsewhere.mkdir()
    resume = tuner(elsewhere, *shlex.split(resume_command)[1:], "--wait", **no_env)
    assert resume.returncode == 0, resume.stdout + resume.stderr
    assert "job SUCCEEDED: sweep stopped TERMINATED, 2/2 trials ended, best score=80" in resume.stdout, resume.stdout
    stored = results(postgres_url, "stopped")
    per_trial: dict[str, list[int]] = {}
    for trial_id, iteration in stored:
        per_trial.setdefault(trial_id, []).append(iteration)
    assert [its for its in per_trial.values()] == [list(range(1, 41))] * 2


def test_a_killed_driver_shows_interrupted_within_four_heartbeats(cluster, workdir, postgres_url):
    beat = {"TUNER_HEARTBEAT_S": "0.5"}  # the driver beats every 0.5 s: stale after 2 s
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "200"))
    proc = tuner(workdir, "submit", name, "--name", "killed", "--address", cluster.address, **beat)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = proc.stdout.split("as Ray Job ")[1].split()[0]
    wait_for(lambda: len(results(postgres_url, "killed")) >= 4, "the first results")
    drivers = [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[1:3] == ["-m", "tuner.cli"]
               and p.environ().get("TUNER_JOB_ID") == job_id]  # the python, not the job's shell around it
    assert len(drivers) == 1, drivers
    drivers[0].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: ls_row(workdir, "killed", **beat)[1:2] == ["INTERRUPTED"], "INTERRUPTED in tuner ls", 60)
    print(f"shown INTERRUPTED {time.monotonic() - killed_at:.1f} s after the driver was killed")


def test_two_sweeps_submitted_at_once_both_progress_and_finish(cluster, workdir, postgres_url):
    """Four 0.5-CPU trials each on a 2-CPU cluster: alone, the first sweep would hold all of it. With
    a submitted sweep's share (half the CPUs), both run two trials at once: every trial holds after
    its third result until `release` exists, and both sweeps get there before it does."""
    release = workdir / "release"
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "15").replace("[1.0, 2.0]", "[1.0, 2.0, 3.0, 4.0]")
                + f"  release: {release}\n")
    for sweep in ("first", "second"):
        proc = tuner(workdir, "submit", name, "--name", sweep, "--address", cluster.address)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    wait_for(lambda: [len(results(postgres_url, s)) for s in ("first", "second")] == [6, 6],
             "two trials of each sweep to hold at once")
    release.touch()
    wait_for(lambda: all(ls_row(workdir, s)[1:2] == ["TERMINATED"] for s in ("first", "second")), "both sweeps")
    assert [len(results(postgres_url, s)) for s in ("first", "second")] == [60, 60]


def test_bad_submissions_are_one_line_each_and_submit_nothing(cluster, workdir, tmp_path_factory):
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "2"))
    no_token_home = tmp_path_factory.mktemp("home")
    cases = [
        (["--address", f"http://127.0.0.1:{free_port()}"], {}, 1, "cannot reach the Ray Jobs API at http://127.0.0.1:"),
        (["--address", f"http://{cluster.gcs_address}"], {}, 1, "is that the head node's dashboard"),
        (["--address", "ray://127.0.0.1:10001"], {}, 2, "is not the Jobs API"),
        (["--address", cluster.address], {"HOME": str(no_token_home)}, 1, "this machine has no token"),
        (["--address", cluster.address, "--set", "trainable=notthere:train"], {}, 2,
         "spec key 'trainable': cannot import module 'notthere'"),
        (["--address", "http://203.0.113.7:8265"], {"TUNER_DATABASE_URL": ""}, 2,
         "needs a database both machines reach"),
        (["--address", "http://203.0.113.7:8265", "--database-url", "sqlite:///explicit.db"], {}, 2,
         "lives on one machine's disk"),
    ]
    jobs_before = _job_count(cluster.address)
    for flags, env, code, said in cases:
        proc = tuner(workdir, "submit", name, "--name", "bad", *flags, timeout=120, **env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == code and len(lines) == 1 and lines[0].startswith("tuner: error: "), \
            (flags, proc.returncode, proc.stderr)
        assert said is None or said in lines[0], (flags, lines[0])
    assert _job_count(cluster.address) == jobs_before
    assert not (workdir / "explicit.db").exists()


def test_a_sweep_submitted_to_a_new_sqlite_file_on_this_machine_runs_there(cluster, workdir):
    """The head is this machine: a SQLite URL naming a file that does not exist yet is made, as
    `tuner sweep` makes it, and the job's driver (in another directory) writes into that file."""
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "2"))
    proc = tuner(workdir, "submit", name, "--name", "lite", "--address", cluster.address,
                 "--database-url", "sqlite:///lite.db", "--wait")
    assert proc.returncode == 0, proc.stdout + proc.stderr + _logs(workdir, "lite", "--database-url",
                                                                   f"sqlite:///{workdir / 'lite.db'}")
    assert "job SUCCEEDED: sweep lite TERMINATED, 2/2 trials ended" in proc.stdout, proc.stdout
    listed = tuner(workdir, "ls", "--database-url", f"sqlite:///{workdir / 'lite.db'}")
    assert listed.returncode == 0 and "lite " in listed.stdout and "2/2" in listed.stdout, listed.stdout


def test_a_head_whose_job_agent_cannot_listen_says_so_at_once(workdir, tmp_path_factory):
    """The job agent's port is taken: Ray answers "No available agent"; the submission says why
    (the head's log, read where it is on this machine) as soon as the agent gave up."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    broken = start_cluster(tmp_path_factory.mktemp("broken"), cpus=1, agent_port=port)
    try:
        name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "2"))
        began = time.monotonic()
        proc = tuner(workdir, "submit", name, "--name", "agentless", "--address", broken.address, timeout=180)
        took = time.monotonic() - began
    finally:
        broken.stop()
        taken.close()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "No available agent" in lines[0] and f"cannot listen on port {port}: it is in use" in lines[0], lines[0]
    assert "dashboard_agent.log" in lines[0] and "--dashboard-agent-listen-port" in lines[0], lines[0]
    print(f"said after {took:.1f} s")
    assert ls_row(workdir, "agentless") == []  # its record was taken back


def test_tuner_sweep_joins_a_token_cluster_by_its_address_and_says_when_the_token_is_missing(
    cluster, workdir, tmp_path_factory,
):
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "2"))
    storage = str(workdir / "results")
    proc = tuner(workdir, "sweep", name, "--name", "joined", "--address", cluster.gcs_address, "--storage-path",
                 storage, "--progress", "none")
    assert proc.returncode == 0 and "sweep joined: 2 trials (2 TERMINATED)" in proc.stdout, proc.stdout + proc.stderr
    home = tmp_path_factory.mktemp("home")  # a machine without the cluster's token
    proc = tuner(workdir, "sweep", name, "--name", "refused", "--address", cluster.gcs_address, "--storage-path",
                 storage, "--progress", "none", timeout=240, HOME=str(home))
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("tuner: ")]
    assert proc.returncode == 1 and len(lines) == 1 and "copy the head node's ~/.ray/auth_token here" in lines[0], \
        proc.stderr


def _job_count(address: str) -> int:
    from ray.job_submission import JobSubmissionClient

    from tuner.cluster.auth import use_cluster_token

    use_cluster_token()
    return len(JobSubmissionClient(address).list_jobs())


def test_a_validation_submitted_to_the_cluster_is_read_back_here(cluster, workdir):
    name = spec(workdir, SLOW_SPEC.replace("ITERATIONS", "2"))
    proc = tuner(workdir, "submit", name, "--name", "checked", "--address", cluster.address, "--wait")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = tuner(workdir, "validate", "checked", "--top-k", "1", "--seeds", "2", "--submit", "--address",
                 cluster.address)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitted sweep checked-validation as Ray Job" in proc.stdout
    wait_for(lambda: ls_row(workdir, "checked-validation")[1:2] == ["TERMINATED"], "the validation to end",
             explain=lambda: _logs(workdir, "checked-validation"))
    proc = tuner(workdir, "validate", "checked", "--top-k", "1", "--seeds", "2", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import json

    report = json.loads(proc.stdout)
    (best,) = report["configs"]
    assert report["complete"] and best["config"]["x"] == 2.0 and best["scores"] == [4.0, 4.0]
