"""tune.run end to end: real Ray actors, real SQL store, analysis from another process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import ray
import sqlalchemy as sa

from tests.conftest import ROOT
from tuner import tune
from tuner.errors import TuneError
from tuner.store import Store

pytestmark = pytest.mark.usefixtures("ray_session")


def train_linear(config):
    for i in range(10):
        tune.report({"score": config["x"] * i, "y": config["y"]})


def train_timed(config):
    pg = ray.util.get_current_placement_group()
    start = time.time()
    time.sleep(config["sleep"])
    tune.report(
        {
            "start": start,
            "end": time.time(),
            "pid": os.getpid(),
            "pg_bundles": json.dumps(pg.bundle_specs if pg else None),
        }
    )


def train_checkpointing(config):
    """Reports a checkpoint each step; fails once at step 3 (marker file), then resumes from it."""
    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "step.txt")) as f:
            start = int(f.read()) + 1
    for step in range(start, 6):
        if step == 3 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("boom at step 3")
        d = os.path.join(tune.get_context().get_trial_dir(), f"tmp_{step}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "step.txt"), "w") as f:
            f.write(str(step))
        tune.report({"step": step, "resumed": ckpt is not None}, checkpoint=tune.Checkpoint.from_directory(d))


def train_fails(config):
    tune.report({"score": 0})
    raise ValueError(f"always fails for {config['x']}")


def train_no_metric(config):
    tune.report({"other": 1})


class Counter(tune.Trainable):
    """Counts up by config['inc']; fails once at iteration config['fail_at'] (marker file)."""

    def setup(self, config):
        self.value = 0
        self.pid = os.getpid()

    def step(self):
        if self.iteration + 1 == self.config.get("fail_at") and not os.path.exists(self.config["marker"]):
            open(self.config["marker"], "w").close()
            raise RuntimeError("counter failure")
        self.value += self.config["inc"]
        pg = ray.util.get_current_placement_group()
        return {"value": self.value, "bundles": json.dumps(pg.bundle_specs if pg else None), "done": self.iteration + 1 >= 5}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "value.json"), "w") as f:
            json.dump({"value": self.value}, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "value.json")) as f:
            self.value = json.load(f)["value"]

    @classmethod
    def default_resource_request(cls, config):
        return [{"cpu": 0.5}, {"cpu": 0.25}]


def _results(path, name=None, database_url=None):
    analysis = tune.load(os.path.join(path, name) if name else path, database_url=database_url)
    return analysis


def test_readme_example_every_result_stored_and_best_found(tmp_path):
    analysis = tune.run(
        train_linear,
        config={"x": tune.uniform(0, 1), "y": tune.grid_search([1, 2])},
        num_samples=4,
        metric="score",
        mode="max",
        storage_path=str(tmp_path),
        name="demo",
        resources_per_trial={"cpu": 0.5},
        seed=1,
        verbose=0,
    )
    trials = analysis.trials
    assert len(trials) == 8
    assert {t.status for t in trials} == {"TERMINATED"}
    assert sorted(t.config["y"] for t in trials) == [1, 1, 1, 1, 2, 2, 2, 2]
    df = analysis.results_df
    assert len(df) == 80
    assert not df.duplicated(["trial_id", "training_iteration"]).any()
    for column in ("score", "training_iteration", "time_total_s", "timestamp", "trial_id"):
        assert df[column].notna().all(), column
    best_x = max(t.config["x"] for t in trials)
    assert analysis.best_config["x"] == best_x
    assert analysis.best_result["score"] == pytest.approx(9 * best_x)
    assert analysis.best_trial.config == analysis.best_config
    frame = analysis.dataframe()
    assert len(frame) == 8 and "config/x" in frame.columns

    # The same answers from the store, in a new process.
    code = (
        "import json, sys; from tuner import tune; a = tune.load(sys.argv[1]); "
        "print(json.dumps([a.best_config, len(a.trials), len(a.results_df)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "demo")], capture_output=True, text=True, check=True, cwd=ROOT
    )
    best_config, n_trials, n_results = json.loads(out.stdout.strip().splitlines()[-1])
    assert best_config == analysis.best_config and n_trials == 8 and n_results == 80


def train_at_barrier(config):
    """Announce this trial's start in a shared folder, then wait (up to a minute) until
    ``config["parties"]`` trials have started: they did run at the same time if all get through."""
    pg = ray.util.get_current_placement_group()
    folder = config["folder"]
    open(os.path.join(folder, f"started_{config['i']}"), "w").close()
    deadline = time.monotonic() + 60.0
    while len(os.listdir(folder)) < config["parties"] and time.monotonic() < deadline:
        time.sleep(0.01)
    tune.report({"met": len(os.listdir(folder)) >= config["parties"], "pid": os.getpid(),
                 "pg_bundles": json.dumps(pg.bundle_specs if pg else None)})


def test_trials_run_concurrently_in_their_own_placement_groups(tmp_path):
    """4 trials of 0.5 CPU on 2 CPUs: all four are running at once (each waits for the others)."""
    folder = tmp_path / "barrier"
    folder.mkdir()
    analysis = tune.run(
        train_at_barrier,
        config={"folder": str(folder), "parties": 4, "i": tune.grid_search(list(range(4)))},
        resources_per_trial={"cpu": 0.5},
        storage_path=str(tmp_path),
        name="concurrent",
        verbose=0,
    )
    results = [t.last_result for t in analysis.trials]
    assert all(json.loads(r["pg_bundles"]) == [{"CPU": 0.5}] for r in results)
    assert all(r["pid"] != os.getpid() for r in results)
    assert all(r["met"] for r in results), "the 4 trials did not all run at once"


def test_max_concurrent_trials_serialises(tmp_path):
    analysis = tune.run(
        train_timed,
        config={"sleep": 0.2, "i": tune.grid_search(list(range(3)))},
        resources_per_trial={"cpu": 0.5},
        max_concurrent_trials=1,
        storage_path=str(tmp_path),
        name="serial",
        verbose=0,
    )
    spans = sorted((t.last_result["start"], t.last_result["end"]) for t in analysis.trials)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_class_trainable_uses_default_resource_request_and_checkpoints(tmp_path):
    analysis = tune.run(
        Counter,
        config={"inc": tune.grid_search([1, 2])},
        checkpoint_freq=2,
        checkpoint_at_end=True,
        metric="value",
        mode="max",
        storage_path=str(tmp_path),
        name="counter",
        verbose=0,
    )
    trials = sorted(analysis.trials, key=lambda t: t.config["inc"])
    assert [t.last_result["value"] for t in trials] == [5, 10]
    assert json.loads(trials[0].last_result["bundles"]) == [{"CPU": 0.5}, {"CPU": 0.25}]
    for trial in trials:
        assert trial.checkpoint_path.endswith("checkpoint_000005")
        with open(os.path.join(trial.checkpoint_path, "value.json")) as f:
            assert json.load(f)["value"] == trial.last_result["value"]
        trial_dir = os.path.dirname(trial.checkpoint_path)
        assert sorted(p for p in os.listdir(trial_dir) if p.startswith("checkpoint_")) == [
            "checkpoint_000002", "checkpoint_000004", "checkpoint_000005"
        ]
    assert analysis.best_config == {"inc": 2}


def test_failed_class_trial_retries_from_its_last_checkpoint(tmp_path):
    analysis = tune.run(
        Counter,
        config={"inc": 1, "fail_at": 4, "marker": str(tmp_path / "marker")},
        checkpoint_freq=1,
        max_failures=1,
        storage_path=str(tmp_path),
        name="retry",
        verbose=0,
    )
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.num_failures == 1
    assert "counter failure" in trial.error
    curve = analysis.trial_dataframes[trial.trial_id]
    assert list(curve["training_iteration"]) == [1, 2, 3, 4, 5]
    assert list(curve["value"]) == [1, 2, 3, 4, 5]  # restored value 3 at iteration 3, not restarted from 0


def test_failed_function_trial_resumes_from_reported_checkpoint(tmp_path):
    analysis = tune.run(
        train_checkpointing,
        config={"marker": str(tmp_path / "marker")},
        max_failures=2,
        storage_path=str(tmp_path),
        name="fn_retry",
        verbose=0,
    )
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.num_failures == 1
    curve = analysis.trial_dataframes[trial.trial_id]
    assert list(curve["step"]) == [0, 1, 2, 3, 4, 5]
    assert list(curve["resumed"]) == [False, False, False, True, True, True]
    assert os.path.basename(trial.checkpoint_path) == "checkpoint_000006"


def test_error_trial_keeps_traceback_and_others_go_on(tmp_path):
    with pytest.raises(TuneError, match="1 trial\\(s\\) did not complete"):
        tune.run(train_fails, config={"x": 1}, storage_path=str(tmp_path), name="fails", verbose=0, max_failures=1)
    analysis = tune.load(tmp_path / "fails")
    (trial,) = analysis.trials
    assert trial.status == "ERROR" and trial.num_failures == 2
    assert "ValueError: always fails for 1" in trial.error and "Traceback" in trial.error

    def mixed(config):
        if config["bad"]:
            raise RuntimeError("bad trial")
        for i in range(3):
            tune.report({"score": i})

    analysis = tune.run(
        mixed,
        config={"bad": tune.grid_search([True, False, False])},
        storage_path=str(tmp_path),
        name="mixed",
        raise_on_failed_trial=False,
        resources_per_trial={"cpu": 0.5},
        verbose=0,
    )
    statuses = sorted(t.status for t in analysis.trials)
    assert statuses == ["ERROR", "TERMINATED", "TERMINATED"]
    assert len(analysis.results_df) == 6
    assert list(analysis.errors.values())[0].count("bad trial") >= 1


@pytest.mark.parametrize(
    "stop, expected_iterations",
    [
        ({"training_iteration": 3}, 3),
        (lambda trial_id, result: result["score"] >= 4, 5),
        (tune.MaximumIterationStopper(2), 2),
    ],
    ids=["dict", "callable", "stopper"],
)
def test_stop_conditions(tmp_path, stop, expected_iterations):
    analysis = tune.run(
        train_linear, config={"x": 1, "y": 0}, stop=stop, storage_path=str(tmp_path), name="stop", verbose=0
    )
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED"
    assert trial.last_result["training_iteration"] == expected_iterations
    assert len(analysis.results_df) == expected_iterations


def test_time_budget_stops_the_sweep(tmp_path):
    def forever(config):
        while True:
            time.sleep(0.05)
            tune.report({"t": time.time()})

    start = time.monotonic()
    analysis = tune.run(forever, time_budget_s=5, storage_path=str(tmp_path), name="budget", verbose=0)
    assert 5 <= time.monotonic() - start < 30
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and len(analysis.results_df) >= 1


def test_same_seed_same_configs(tmp_path):
    space = {"a": tune.uniform(0, 1), "b": tune.choice(["x", "y", "z"]), "n": {"c": tune.loguniform(1e-4, 1)}}

    def configs(name):
        analysis = tune.run(
            train_linear, config={**space, "x": 1, "y": 2}, num_samples=5, seed=7,
            storage_path=str(tmp_path), name=name, resources_per_trial={"cpu": 0.5}, verbose=0,
        )
        return [t.config for t in sorted(analysis.trials, key=lambda t: t.index)]

    first, second = configs("seed_a"), configs("seed_b")
    assert first == second
    assert len({c["a"] for c in first}) == 5


def test_postgresql_store(tmp_path, postgres_url):
    name = f"pg_{uuid.uuid4().hex[:8]}"
    analysis = tune.run(
        train_linear, config={"x": tune.grid_search([0.1, 0.9]), "y": 1}, metric="score", mode="max",
        storage_path=str(tmp_path), database_url=postgres_url, name=name, verbose=0,
    )
    assert analysis.best_config["x"] == 0.9
    assert not (tmp_path / name / "tuner.db").exists()
    again = tune.load(tmp_path / name, database_url=postgres_url)
    assert len(again.results_df) == 20 and again.best_config["x"] == 0.9


# -- bad input: one clear error naming the argument, nothing written -----------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mode": "best", "metric": "score"}, "mode must be one of"),
        ({"metric": "score"}, "metric and mode go together"),
        ({"num_samples": 0}, "num_samples must be an int >= 1"),
        ({"max_failures": -2}, "max_failures"),
        ({"time_budget_s": -1}, "time_budget_s"),
        ({"max_concurrent_trials": 0}, "max_concurrent_trials"),
        ({"cpu_share": 1.5}, r"cpu_share must be a number in \(0, 1\]"),
        ({"cpu_share": 0}, r"cpu_share must be a number in \(0, 1\]"),
        ({"resources_per_trial": {"cpu": -1}}, "resources_per_trial"),
        ({"resources_per_trial": {"cpu": 64}}, "could never start"),
        ({"stop": 5}, "stop must be"),
        ({"stop": {"score": "high"}}, "stop\\['score'\\]"),
        ({"checkpoint_freq": 2}, "checkpoint_freq"),
        ({"config": [1, 2]}, "config must be a dict"),
        ({"verbose": 7}, "verbose must be one of"),
        ({"scheduler": "asha"}, "scheduler must be a TrialScheduler"),
        ({"stop": lambda result: result["score"] > 5}, r"stop: .* stop\(trial_id, result\) -> bool, but .* takes \(result\)"),
        ({"stop": lambda: True}, r"stop: .* stop\(trial_id, result\) -> bool, but .* takes \(\)"),
    ],
)
def test_bad_arguments_name_themselves_and_write_nothing(tmp_path, kwargs, match):
    kwargs = {"config": {"x": 1, "y": 1}, "verbose": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        tune.run(train_linear, storage_path=str(tmp_path), name="bad", **kwargs)
    if "could never start" not in match:
        assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: tune.uniform(5, 1), "lower"),
        (lambda: tune.loguniform(0, 1), "lower"),
        (lambda: tune.randint(3, 3), "lower"),
        (lambda: tune.choice([]), "categories"),
    ],
)
def test_bad_domains_name_their_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("name", ["..", ".", "../escaped", "a/b", ".hidden", "with space", "new\nline"])
def test_a_name_that_is_not_a_plain_directory_name_is_refused_and_nothing_is_written(tmp_path, name):
    storage = tmp_path / "storage"
    with pytest.raises(ValueError, match=r"^name must be letters, digits, '_', '-' or '\.', starting with"):
        tune.run(train_linear, config={"x": 1, "y": 1}, storage_path=str(storage), name=name, verbose=0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["file", "inside-a-file", "unwritable", "run-dir-is-a-file", "tensorboard-dir-is-a-file"])
def test_a_storage_path_or_tensorboard_dir_that_cannot_be_written_is_refused_first(tmp_path, case):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    storage, kwargs, match = tmp_path / "storage", {}, "^storage_path: "
    if case == "file":
        storage, match = a_file, f"^storage_path: {a_file} is a file"
    elif case == "inside-a-file":
        storage, match = a_file / "storage", f"^storage_path: {a_file / 'storage'} is inside {a_file}, which is a file"
    elif case == "unwritable":
        # Tests run as root, whom permission bits do not stop; /proc takes no new directory from anyone.
        storage, match = Path("/proc") / f"tuner_results_{os.getpid()}", "^storage_path: cannot write into /proc"
    elif case == "run-dir-is-a-file":
        storage.mkdir()
        (storage / "paths").write_text("in the way")
        match = "^name: .* is a file; pick another name"
    else:
        kwargs, match = {"tensorboard_dir": str(a_file)}, f"^tensorboard_dir: {a_file} is a file"
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match=match):
        tune.run(train_linear, config={"x": 1, "y": 1}, storage_path=str(storage), name="paths", verbose=0, **kwargs)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_an_unreachable_ray_address_fails_at_once_and_writes_nothing(tmp_path):
    code = (
        "from tuner import tune\n"
        "def train(config):\n"
        "    tune.report({'score': 1})\n"
        f"tune.run(train, storage_path={str(tmp_path)!r}, name='unreachable', verbose=0)\n"
    )
    with socket.socket() as held:  # bound and never listening: a connection to it is refused
        held.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{held.getsockname()[1]}"
        env = {**os.environ, "RAY_ADDRESS": address}
        # ray.init alone retries such an address for minutes; the interpreter and imports take seconds
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=90)
    assert proc.returncode == 1
    assert f"RayUnreachableError: cannot reach Ray at '{address}' (connection refused)" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_plain_dict_in_a_python_config_is_left_alone(tmp_path):
    """Only a spec's YAML needs telling a distribution from a nested config; in Python a dict is a dict."""
    analysis = tune.run(train_linear, config={"x": 1, "y": {"gaussian": [0, 1]}}, storage_path=str(tmp_path),
                        name="plain", verbose=0)
    assert analysis.trials[0].config == {"x": 1, "y": {"gaussian": [0, 1]}}


def test_non_callable_trainable(tmp_path):
    with pytest.raises(ValueError, match="run_or_experiment"):
        tune.run(42, storage_path=str(tmp_path), verbose=0)
    with pytest.raises(ValueError, match="not registered"):
        tune.run("NoSuchAlgo", storage_path=str(tmp_path), verbose=0)


def test_metric_never_reported_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="metric 'score' was never reported.*other"):
        tune.run(train_no_metric, metric="score", mode="max", storage_path=str(tmp_path), name="nometric", verbose=0)


def test_existing_sweep_name_is_refused_and_left_untouched(tmp_path):
    tune.run(train_linear, config={"x": 1, "y": 1}, storage_path=str(tmp_path), name="once", verbose=0)
    with pytest.raises(ValueError, match="name: a sweep named 'once' already exists"):
        tune.run(train_linear, config={"x": 2, "y": 1}, storage_path=str(tmp_path), name="once", verbose=0)
    analysis = tune.load(tmp_path / "once")
    assert len(analysis.trials) == 1 and analysis.trials[0].config["x"] == 1
    assert len(analysis.results_df) == 10


def test_analysis_reads_a_running_sweep(tmp_path):
    """Another process can read the store while the sweep runs (the trial waits after its 5th
    report until the test has read it)."""
    release = tmp_path / "release"
    code = (
        "import os, time; from tuner import tune\n"
        "def train(config):\n"
        "    for i in range(30):\n"
        "        if i == 5:\n"
        "            deadline = time.time() + 120\n"
        f"            while not os.path.exists({str(release)!r}) and time.time() < deadline: time.sleep(0.02)\n"
        "        tune.report({'score': i})\n"
        f"tune.run(train, metric='score', mode='max', storage_path={str(tmp_path)!r}, name='live', verbose=0)\n"
    )
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray: no start of its own
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env)
    try:
        deadline = time.time() + 120
        seen = 0
        while time.time() < deadline and proc.poll() is None:
            try:
                seen = len(tune.load(tmp_path / "live").results_df)
            except TuneError:
                seen = 0
            if seen:
                break
            time.sleep(0.05)
        assert 0 < seen <= 5, f"saw {seen} results while running"
    finally:
        release.touch()
        proc.wait(timeout=120)
    assert proc.returncode == 0
    assert len(tune.load(tmp_path / "live").results_df) == 30


def test_store_tables_hold_experiments_trials_results(tmp_path):
    tune.run(train_linear, config={"x": 1, "y": 1}, storage_path=str(tmp_path), name="tables", verbose=0)
    with Store(f"sqlite:///{tmp_path / 'tables' / 'tuner.db'}", create=False) as store:
        names = set(sa.inspect(store.engine).get_table_names())
        assert {"experiments", "trials", "results"} <= names
        exp = store.get_experiment("tables")
        rows = store.results(exp["id"])
        assert [r["training_iteration"] for r in rows] == list(range(1, 11))
