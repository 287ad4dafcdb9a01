"""Bad specs and flags: exit code 2, one line naming the problem, no traceback, the store unchanged.

Most cases run ``main(argv)`` in this process (validation happens before Ray is touched); a few
run the real console entry point as a subprocess.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tests.tuner.cli.conftest import cli
from tuner.cli import main

BASE = """\
trainable: tests.tuner.cli.cli_trainables:quadratic
metric: score
mode: max
num_samples: 2
config:
  x: {uniform: [0, 1]}
"""
PPO = """\
trainable: PPO
metric: episode_return_mean
mode: max
config:
  env: CartPole-v1
"""


def _with(base: str, extra: str) -> str:
    return base + extra


# (id, spec text, extra argv, what the error line must say)
CASES = [
    ("unknown-key", _with(BASE, "trainabel: PPO\n"), [],
     "spec key 'trainabel': unknown key; did you mean 'trainable'?"),
    ("missing-trainable", "metric: score\nmode: max\nconfig: {x: 1}\n", [], "spec key 'trainable': missing"),
    ("num-samples-wrong-type", BASE.replace("num_samples: 2", "num_samples: two"), [],
     "spec key 'num_samples': expected an integer >= 1, got 'two' (string)"),
    ("num-samples-zero", BASE.replace("num_samples: 2", "num_samples: 0"), [], "spec key 'num_samples'"),
    ("bad-mode", BASE.replace("mode: max", "mode: maximize"), [],
     "spec key 'mode': unknown mode 'maximize' (expected one of: min, max)"),
    ("metric-without-mode", BASE.replace("mode: max\n", ""), [], "spec key 'mode': missing: metric and mode go together"),
    ("unknown-scheduler", _with(BASE, "scheduler: {type: foo}\n"), [],
     "spec key 'scheduler.type': unknown scheduler 'foo' (expected one of: fifo, asha, hyperband, median, pbt, pb2, pbt_replay)"),
    ("unknown-scheduler-shorthand", _with(BASE, "scheduler: asho\n"), [], "spec key 'scheduler.type': unknown scheduler 'asho'"),
    ("unknown-scheduler-param", _with(BASE, "scheduler: {type: asha, grace: 3}\n"), [],
     "spec key 'scheduler.grace': unknown key; did you mean 'grace_period'?"),
    ("scheduler-param-type", _with(BASE, "scheduler: {type: asha, grace_period: ten}\n"), [],
     "spec key 'scheduler.grace_period': expected a number, got 'ten' (string)"),
    ("scheduler-param-range", _with(BASE, "scheduler: {type: asha, grace_period: 20, max_t: 10}\n"), [],
     "spec key 'scheduler': ASHAScheduler: grace_period must be <= max_t"),
    ("scheduler-needs-metric", "trainable: tests.tuner.cli.cli_trainables:quadratic\nscheduler: asha\nconfig: {x: 1}\n",
     [], "spec key 'metric': missing: scheduler 'asha' need(s) metric and mode"),
    ("pbt-mutation-not-in-config", _with(BASE, "scheduler: {type: pbt, hyperparam_mutations: {lr: [0.1, 0.2]}}\n"), [],
     "hyperparam_mutations key 'lr' is not in the config"),
    ("pb2-bound-not-in-config", _with(BASE, "scheduler: {type: pb2, hyperparam_bounds: {lr: [1.0e-4, 1.0e-2]}}\n"), [],
     "PB2: hyperparam_bounds key 'lr' is not in the config"),
    ("pb2-bad-bound", _with(BASE, "scheduler: {type: pb2, hyperparam_bounds: {x: [1, 0]}}\n"), [],
     "spec key 'scheduler': PB2: hyperparam_bounds['x'] must be [low, high] with finite numbers low < high, got [1, 0]"),
    ("empty-search-space", BASE.replace("config:\n  x: {uniform: [0, 1]}\n", "config: {}\n"), [],
     "spec key 'config': the search space is empty"),
    ("missing-config", BASE.replace("config:\n  x: {uniform: [0, 1]}\n", ""), [], "spec key 'config': missing"),
    ("bad-yaml", _with(BASE, "stop: {training_iteration: [1, 2\n"), [], "is not valid YAML"),
    ("duplicate-key", _with(BASE, "num_samples: 3\n"), [], "key 'num_samples' is given twice at line 7"),
    ("spec-is-a-list", "- trainable: PPO\n", [], "spec: expected a mapping"),
    ("missing-trainable-module", BASE.replace("tests.tuner.cli.cli_trainables:quadratic", "no_such_module:train"), [],
     "spec key 'trainable': cannot import module 'no_such_module'"),
    ("missing-trainable-attribute", BASE.replace("cli_trainables:quadratic", "cli_trainables:nope"), [],
     "spec key 'trainable': module 'tests.tuner.cli.cli_trainables' has no attribute 'nope'"),
    ("unregistered-trainable", BASE.replace("tests.tuner.cli.cli_trainables:quadratic", "QMIX"), [],
     "spec key 'trainable': trainable 'QMIX' is not registered"),
    ("distribution-arity", BASE.replace("{uniform: [0, 1]}", "{uniform: [1]}"), [],
     "spec key 'config.x': uniform expects {uniform: [lower, upper]}, got [1]"),
    ("distribution-argument-type", BASE.replace("{uniform: [0, 1]}", "{uniform: [0, one]}"), [],
     "spec key 'config.x': uniform argument upper must be a number, got 'one' (string)"),
    ("loguniform-bounds", BASE.replace("{uniform: [0, 1]}", "{loguniform: [0, 1]}"), [], "spec key 'config.x': loguniform:"),
    ("empty-choice", BASE.replace("{uniform: [0, 1]}", "{choice: []}"), [],
     "spec key 'config.x': choice expects a non-empty list of values"),
    ("nested-distribution", BASE.replace("x: {uniform: [0, 1]}", "model: {width: {randint: [8]}}"), [],
     "spec key 'config.model.width': randint expects"),
    ("foreign-distribution", BASE.replace("{uniform: [0, 1]}", "{gaussian: [0, 1]}"), [],
     "spec key 'config.x': unknown distribution 'gaussian' (did you mean {randn: [mean?, sd?]}?); "
     "the distributions are: uniform, quniform, loguniform"),
    ("optuna-distribution", BASE.replace("x: {uniform: [0, 1]}", "model: {lr: {suggest_float: [0, 1]}}"), [],
     "spec key 'config.model.lr': unknown distribution 'suggest_float' (did you mean {uniform: [lower, upper]}?)"),
    ("misspelt-distribution", BASE.replace("{uniform: [0, 1]}", "{unifrom: [0, 1]}"), [],
     "unknown distribution 'unifrom' (did you mean {uniform: [lower, upper]}?)"),
    ("foreign-distribution-literal-hint", BASE.replace("{uniform: [0, 1]}", "{categorical: [a, b]}"), [],
     "a nested config with this one key is written {const: {categorical: ...}}"),
    ("unknown-search", _with(BASE, "search: bayes\n"), [],
     "spec key 'search.type': unknown search 'bayes' (expected one of: random, grid, optuna)"),
    ("unknown-sampler", _with(BASE, "search: {type: optuna, sampler: annealing}\n"), [],
     "spec key 'search.sampler': unknown optuna sampler 'annealing' (expected one of: tpe, random, cmaes, qmc, gp)"),
    ("bad-sampler-args", _with(BASE, "search: {type: optuna, sampler_args: {n_startup: 3}}\n"), [],
     "spec key 'search.sampler_args': optuna.samplers.TPESampler:"),
    ("optuna-with-grid", BASE.replace("{uniform: [0, 1]}", "{grid: [0.1, 0.2]}") + "search: optuna\n", [],
     "grid_search at 'x' is not supported"),
    ("zero-repeats", _with(BASE, "search: {type: random, repeat: 0}\n"), [],
     "spec key 'search.repeat': expected an integer >= 1, got 0"),
    ("set-index-without-repeat", _with(BASE, "search: {type: random, set_index: false}\n"), [],
     "spec key 'search.set_index': only with repeat: N"),
    ("grid-search-without-grid", _with(BASE, "search: grid\n"), [],
     "spec key 'config': search 'grid' needs at least one grid axis"),
    ("stop-not-a-mapping", _with(BASE, "stop: 10\n"), [], "spec key 'stop': expected a mapping"),
    ("stop-threshold-type", _with(BASE, "stop: {training_iteration: ten}\n"), [],
     "spec key 'stop.training_iteration': expected a number"),
    ("resources", _with(BASE, "resources: {cpu: -1}\n"), [], "spec key 'resources'"),
    ("max-concurrent-type", _with(BASE, "max_concurrent_trials: 1.5\n"), [],
     "spec key 'max_concurrent_trials': expected an integer >= 1 or null, got 1.5 (number)"),
    ("pack-trials-zero", _with(BASE, "pack_trials: 0\n"), [],
     "spec key 'pack_trials': expected 'auto', False or an int >= 1 (the most trials per pack), got 0"),
    ("cpu-share-over-one", _with(BASE, "cpu_share: 2\n"), [],
     "spec key 'cpu_share': expected a number in (0, 1] (the share of the cluster's CPUs), got 2"),
    ("bad-name", _with(BASE, "name: a/b\n"), [], "spec key 'name': expected letters, digits"),
    ("bad-database-url", _with(BASE, "database_url: 'not a url'\n"), [],
     "spec key 'database_url': not a database URL: 'not a url'"),
    ("ppo-unknown-config-key", PPO + "  learning_rate: 0.1\n", [], "spec key 'config': PPO config: unknown key 'learning_rate'"),
    # flags
    ("set-without-equals", BASE, ["--set", "num_samples"], "argument --set: expected KEY=VALUE"),
    ("set-into-a-scalar", BASE, ["--set", "num_samples.x=1"], "spec key 'num_samples' is not a mapping"),
    ("set-wrong-type", BASE, ["--set", "num_samples=many"], "spec key 'num_samples': expected an integer"),
    ("set-bad-yaml", BASE, ["--set", "config.x=[1, 2"], "argument --set config.x: the value is not valid YAML"),
    ("unknown-flag", BASE, ["--bogus"], "unrecognized arguments: --bogus"),
    ("bad-progress", BASE, ["--progress", "fancy"], "argument --progress: invalid choice: 'fancy'"),
    ("name-flag-invalid", BASE, ["--name", "has space"], "spec key 'name'"),
    ("existing-name", BASE, ["--name", "real"], "a sweep named 'real' already exists"),
]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def storage(real_sweep, monkeypatch):
    monkeypatch.chdir(ROOT)
    return real_sweep.storage


@pytest.mark.parametrize("spec_text, extra, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_spec_or_flag_exits_2_with_one_line_and_writes_nothing(storage, tmp_path, capsys, spec_text, extra,
                                                                  expected):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    before = _snapshot(storage)
    code = main(["sweep", str(spec), "--set", f"storage_path={storage}", *extra])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(("tuner: error: ", "tuner sweep: error: ")), err
    assert expected in last, last
    assert _snapshot(storage) == before
    assert sorted(p.name for p in storage.iterdir()) == ["real"]


def test_at_least_twenty_bad_specs():
    assert len(CASES) >= 20


def test_a_bad_spec_never_prints_a_database_password(storage, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(_with(BASE, "database_url: 'postgresql+psycopg://user:hunter2@127.0.0.1/db'\nnum_samples: x\n"))
    assert main(["sweep", str(spec)]) == 2
    assert "hunter2" not in capsys.readouterr().err


@pytest.mark.parametrize("args, expected", [
    (["show", "no_such_sweep"], "no sweep named 'no_such_sweep'"),
    (["resume", "no_such_sweep"], "no sweep named 'no_such_sweep'"),
    (["best", "no_such_sweep"], "no sweep named 'no_such_sweep'"),
    (["export", "real", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["tensorboard", "real", "--port", "http"], "argument --port: invalid int value: 'http'"),
])
def test_bad_verb_arguments_exit_2(storage, capsys, args, expected):
    assert main([*args, "--storage-path", str(storage)]) == 2
    err = capsys.readouterr().err
    assert expected in err.strip().splitlines()[-1] and "Traceback" not in err


def test_resume_needs_a_sweep_started_by_the_cli(storage, tmp_path, capsys):
    other = tmp_path / "python_sweep"
    other.mkdir()
    (other / "tuner.db").write_bytes((storage / "real" / "tuner.db").read_bytes())
    engine = sa.create_engine(f"sqlite:///{other / 'tuner.db'}")  # as tune.run(name="python_sweep") records it
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE experiments SET name = 'python_sweep', spec = json_set(spec, '$.run_dir', :d)"),
                     {"d": str(other)})
    engine.dispose()
    assert main(["resume", str(other)]) == 2
    assert "it was not started by `tuner sweep`" in capsys.readouterr().err


@pytest.mark.parametrize("spec_text, expected", [
    (BASE.replace("tests.tuner.cli.cli_trainables:quadratic", "no_such_module:train"),
     "tuner: error: spec key 'trainable': cannot import module 'no_such_module'"),
    (_with(BASE, "scheduler: {type: foo}\n"), "tuner: error: spec key 'scheduler.type': unknown scheduler 'foo'"),
    (BASE + "  y: [1, 2\n", "tuner: error: spec: "),
], ids=["missing-module", "unknown-scheduler", "bad-yaml"])
def test_console_entry_point_answers_a_bad_spec_with_exit_2(storage, tmp_path, spec_text, expected):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    before = _snapshot(storage)
    proc = cli("sweep", str(spec), "--set", f"storage_path={storage}", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip().splitlines()[-1]]  # one line
    assert proc.stderr.startswith(expected), proc.stderr
    assert _snapshot(storage) == before and os.listdir(storage) == ["real"]


@pytest.mark.parametrize("case", ["storage-path-is-a-file", "storage-path-inside-a-file", "storage-path-unwritable",
                                  "tensorboard-dir-is-a-file"])
def test_a_storage_path_or_tensorboard_dir_that_cannot_be_written_exits_2(tmp_path, capsys, case):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE)
    storage, field, extra = tmp_path / "results", "storage_path", []
    if case == "storage-path-is-a-file":
        storage = a_file
    elif case == "storage-path-inside-a-file":
        storage = a_file / "results"
    elif case == "storage-path-unwritable":
        # Tests run as root, whom permission bits do not stop; /proc takes no new directory from anyone.
        storage = Path("/proc") / f"tuner_results_{os.getpid()}"
    else:
        field, extra = "tensorboard_dir", ["--set", f"tensorboard_dir={a_file}"]
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["sweep", str(spec), "--name", "unusable", "--set", f"storage_path={storage}", *extra])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert err.startswith(f"tuner: error: {field}: ") and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
