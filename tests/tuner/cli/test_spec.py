"""Spec loading: YAML search spaces, schedulers and searchers with their parameters, --set overrides."""

from __future__ import annotations

import pytest

from schedulers import PB2, ASHAScheduler, HyperBandScheduler, MedianStoppingRule, PopulationBasedTraining
from tests.conftest import ROOT
from tuner.cli import main, spec
from tuner.cli.errors import SpecError
from tuner.cli.overrides import apply_overrides
from tuner.cli.paths import DEFAULT_STORAGE_PATH
from tuner.search.space import Categorical, Float, Integer, Normal

BASE = {
    "trainable": "tests.tuner.cli.cli_trainables:quadratic",
    "metric": "score",
    "mode": "max",
    "config": {"x": {"uniform": [0, 1]}},
}


def _doc(**changes):
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    doc.update(changes)
    return doc


def test_yaml_reads_scientific_floats_and_every_distribution(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "trainable: tests.tuner.cli.cli_trainables:quadratic\n"
        "config:\n"
        "  x: {uniform: [0, 1]}\n"
        "  lr: {loguniform: [1e-4, 3E-2]}\n"
        "  q: {quniform: [0, 1, 0.25]}\n"
        "  ql: {qloguniform: [1e-3, 1, 1e-3]}\n"
        "  n: {randint: [1, 10]}\n"
        "  qn: {qrandint: {lower: 32, upper: 256, q: 32}}\n"
        "  ln: {lograndint: [1, 1000]}\n"
        "  qln: {qlograndint: [8, 512, 8]}\n"
        "  g: {randn: [0, 2]}\n"
        "  qg: {qrandn: [0, 1, 0.5]}\n"
        "  act: {choice: [relu, tanh]}\n"
        "  width: {grid: [64, 128]}\n"
        "  model: {depth: {grid_search: [1, 2]}, name: mlp}\n"
        "  literal: {const: {choice: 1}}\n"
        "  sizes: [64, 64]\n"
        "  eps: 1e-8\n"
    )
    config = spec.load(path).config
    assert isinstance(config["x"], Float) and (config["x"].lower, config["x"].upper) == (0, 1)
    assert isinstance(config["lr"], Float) and config["lr"].log and config["lr"].lower == pytest.approx(1e-4)
    assert config["q"].q == 0.25 and config["ql"].log and config["ql"].q == 1e-3
    assert isinstance(config["n"], Integer) and isinstance(config["qn"], Integer) and config["qn"].q == 32
    assert config["ln"].log and config["qln"].q == 8
    assert isinstance(config["g"], Normal) and isinstance(config["qg"], Normal)
    assert isinstance(config["act"], Categorical) and config["act"].categories == ["relu", "tanh"]
    assert config["width"] == {"grid_search": [64, 128]}
    assert config["model"] == {"depth": {"grid_search": [1, 2]}, "name": "mlp"}
    assert config["literal"] == {"choice": 1} and config["sizes"] == [64, 64] and config["eps"] == 1e-8
    assert spec.load(path).searched == {
        "x": "Float", "lr": "Float", "q": "Float", "ql": "Float", "n": "Integer", "qn": "Integer", "ln": "Integer",
        "qln": "Integer", "g": "Normal", "qg": "Normal", "act": "Categorical", "width": "grid", "model/depth": "grid",
    }


@pytest.mark.parametrize("node, cls, attrs", [
    ({"type": "asha", "time_attr": "step", "grace_period": 2, "max_t": 8, "reduction_factor": 2},
     ASHAScheduler, {"_grace_period": 2, "_max_t": 8, "_reduction_factor": 2}),
    ("hyperband", HyperBandScheduler, {}),
    ({"type": "median", "grace_period": 1.5, "min_samples_required": 2, "min_time_slice": float("inf")},
     MedianStoppingRule, {"_grace_period": 1.5}),
    ({"type": "pbt", "perturbation_interval": 4, "hyperparam_mutations": {"x": {"uniform": [0, 1]}, "y": [1, 2]},
      "perturbation_factors": [1.5, 0.5], "seed": 1},
     PopulationBasedTraining, {"_perturbation_interval": 4, "_perturbation_factors": (1.5, 0.5)}),
    ({"type": "pb2", "time_attr": "env_steps_total", "perturbation_interval": 5000,
      "hyperparam_bounds": {"x": [0, 1], "y": [1, 2]}, "seed": 1},
     PB2, {"_perturbation_interval": 5000, "_paths": [("x",), ("y",)]}),
])
def test_schedulers_are_built_with_their_parameters(node, cls, attrs):
    doc = _doc(scheduler=node)
    if cls in (PopulationBasedTraining, PB2):
        doc["config"] = {"x": {"uniform": [0, 1]}, "y": {"choice": [1, 2]}}
    kwargs = spec.validate(doc, default_name="s").run_kwargs()
    scheduler = kwargs["scheduler"]
    assert type(scheduler) is cls
    for name, value in attrs.items():
        assert getattr(scheduler, name) == value
    assert kwargs["scheduler"] is not spec.validate(doc, default_name="s").run_kwargs()["scheduler"]  # fresh each run


def test_a_pbt_replay_is_built_from_its_policy_file_and_needs_one(tmp_path):
    import json

    from schedulers import PopulationBasedTrainingReplay

    policy = tmp_path / "pbt_policy_t2.txt"
    policy.write_text(json.dumps(["t2", "t0", 4, 4, {"lr": 0.1}, {"lr": 0.2}]) + "\n")
    doc = _doc(scheduler={"type": "pbt_replay", "policy_file": str(policy)})
    doc.pop("metric", None), doc.pop("mode", None)
    scheduler = spec.validate(doc, default_name="s").run_kwargs()["scheduler"]
    assert isinstance(scheduler, PopulationBasedTrainingReplay)
    with pytest.raises(SpecError, match="spec key 'scheduler.policy_file': missing: scheduler 'pbt_replay' needs it"):
        spec.validate(_doc(scheduler={"type": "pbt_replay"}), default_name="s")


def test_optuna_search_gets_a_seeded_sampler_and_arguments():
    import optuna

    doc = _doc(search={"type": "optuna", "sampler": "tpe", "sampler_args": {"n_startup_trials": 3}}, seed=5)
    searcher = spec.validate(doc, default_name="s").run_kwargs()["search_alg"]
    assert type(searcher).__name__ == "OptunaSearch"
    sampler = searcher._sampler
    assert isinstance(sampler, optuna.samplers.TPESampler) and sampler._n_startup_trials == 3
    random = spec.validate(_doc(search={"type": "optuna", "sampler": "random"}), default_name="s").run_kwargs()
    assert isinstance(random["search_alg"]._sampler, optuna.samplers.RandomSampler)


def test_run_kwargs_and_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("TUNER_STORAGE_PATH", raising=False)
    doc = _doc(num_samples=3, seed=2, stop={"training_iteration": 4}, resources={"cpu": 0.5}, max_concurrent_trials=2,
               time_budget_s=60, tensorboard=False)
    swept = spec.validate(doc, default_name="named")
    kwargs = swept.run_kwargs()
    assert kwargs["num_samples"] == 3 and kwargs["seed"] == 2 and kwargs["stop"] == {"training_iteration": 4}
    assert kwargs["resources_per_trial"] == {"cpu": 0.5} and kwargs["max_concurrent_trials"] == 2
    assert kwargs["time_budget_s"] == 60 and kwargs["tensorboard"] is False and kwargs["name"] == "named"
    assert kwargs["storage_path"] == DEFAULT_STORAGE_PATH and kwargs["database_url"] is None
    monkeypatch.setenv("TUNER_STORAGE_PATH", str(tmp_path))
    assert spec.validate(_doc(), default_name="n").run_dir == tmp_path / "n"


def test_default_storage_path_is_tune_runs():
    from tuner.api import DEFAULT_STORAGE_PATH as API_DEFAULT

    assert DEFAULT_STORAGE_PATH == API_DEFAULT


def test_overrides_set_nested_keys_and_expand_shorthands(tmp_path):
    doc = apply_overrides(_doc(scheduler="asha"), [
        "scheduler.max_t=9", "config.x=0.5", "stop.training_iteration=3", "search={type: optuna}", "num_samples=2",
    ])
    assert doc["scheduler"] == {"type": "asha", "max_t": 9} and doc["config"]["x"] == 0.5
    assert doc["stop"] == {"training_iteration": 3} and doc["search"] == {"type": "optuna"} and doc["num_samples"] == 2
    path = tmp_path / "my spec!.yaml"
    path.write_text("trainable: tests.tuner.cli.cli_trainables:quadratic\nconfig: {x: 1}\n")
    assert spec.load(path).name.startswith("my_spec__")  # a directory-safe name from the file's


def test_repeat_wraps_the_search_in_a_repeater():
    from tuner.search.optuna_search import OptunaSearch
    from tuner.search.repeater import Repeater

    searcher = spec.validate(_doc(search={"type": "optuna", "repeat": 3}), default_name="s").run_kwargs()["search_alg"]
    assert isinstance(searcher, Repeater) and isinstance(searcher.searcher, OptunaSearch)
    assert (searcher.repeat, searcher.set_index) == (3, True)
    plain = spec.validate(_doc(search={"type": "random", "repeat": 2, "set_index": False}), default_name="s")
    searcher = plain.run_kwargs()["search_alg"]
    assert isinstance(searcher, Repeater) and (searcher.repeat, searcher.set_index) == (2, False)
    assert not isinstance(spec.validate(_doc(search="random"), default_name="s").run_kwargs()["search_alg"], Repeater)


def test_a_repeated_sweep_runs_each_config_on_each_index(ray_session, tmp_path, monkeypatch, capsys):
    from tuner.analysis import ExperimentAnalysis

    monkeypatch.chdir(ROOT)
    path = tmp_path / "repeat.yaml"
    path.write_text(
        # the grid x random generator's num_samples counts configs; each runs twice
        "trainable: tests.tuner.cli.cli_trainables:quadratic\nmetric: score\nmode: max\nnum_samples: 2\nseed: 0\n"
        "search: {type: random, repeat: 2}\nresources: {cpu: 0.5}\ntensorboard: false\n"
        "config: {x: {uniform: [0, 1]}, iterations: 1}\n"
    )
    assert main(["sweep", str(path), "--name", "rep", "--set", f"storage_path={tmp_path}"]) == 0
    assert "sweep rep: 4 trials (4 TERMINATED)" in capsys.readouterr().out
    with ExperimentAnalysis(tmp_path / "rep") as analysis:
        configs = sorted((t.config["x"], t.config["__trial_index__"]) for t in analysis.trials)
    assert [index for _, index in configs] == [0, 1, 0, 1]
    assert configs[0][0] == configs[1][0] != configs[2][0] == configs[3][0]


def test_an_optuna_sweep_runs_end_to_end(ray_session, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    path = tmp_path / "optuna.yaml"
    path.write_text(
        "trainable: tests.tuner.cli.cli_trainables:quadratic\nmetric: score\nmode: max\nnum_samples: 4\nseed: 0\n"
        "search: {type: optuna, sampler: tpe, sampler_args: {n_startup_trials: 2}}\n"
        "scheduler: {type: asha, time_attr: step, grace_period: 1, max_t: 3}\n"
        "resources: {cpu: 0.5}\ntensorboard: false\n"
        "config: {x: {uniform: [0, 1]}, iterations: 3}\n"
    )
    assert main(["sweep", str(path), "--name", "opt", "--set", f"storage_path={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "sweep opt: 4 trials (4 TERMINATED)" in out and "best config: {'x': " in out


def test_a_spec_with_pack_trials_runs_its_ppo_trials_packed(ray_session, tmp_path, monkeypatch, capsys):
    from tuner.analysis import ExperimentAnalysis

    monkeypatch.chdir(ROOT)
    path = tmp_path / "packed.yaml"
    path.write_text(
        "trainable: PPO\nmetric: episode_return_mean\nmode: max\nstop: {training_iteration: 2}\npack_trials: 2\n"
        "tensorboard: false\nconfig: {env: CartPole-v1, num_envs_per_worker: 4, train_batch_size: 64, "
        "minibatch_size: 32, num_epochs: 1, hidden_sizes: [16], seed: 0, lr: {grid: [0.001, 0.003]}}\n"
    )
    assert main(["sweep", str(path), "--name", "packed", "--set", f"storage_path={tmp_path}"]) == 0
    out = capsys.readouterr().out  # the CLI's progress shows the line the sweep says once
    assert "pack_trials=2: trials of PPO run packed, up to 2 to a process" in out and "2 TERMINATED" in out, out
    with ExperimentAnalysis(tmp_path / "packed") as analysis:
        last = [t.last_result for t in analysis.trials]
    assert [r["learner"] for r in last] == ["packed"] * 2 and len({r["pack_id"] for r in last}) == 1


WRONG = [None, True, 0, -1, 1.5, float("nan"), "", "abc", [], [1], [{"a": 1}], {}, {"a": 1}, {"type": "asha"},
         {"type": []}, {"uniform": [0, 1]}, {"grid": []}, {1: 2}]


def _outcome(doc):
    try:
        spec.validate(doc, default_name="n")
    except SpecError:
        return "error"
    return "valid"


def test_any_value_anywhere_is_a_spec_error_or_valid_never_a_crash():
    from tuner.cli.components import scheduler_parameters
    from tuner.cli.space import DISTRIBUTIONS

    docs = []
    for key in spec.KEYS:
        docs += [_doc(**{key: value}) for value in WRONG]
    required = {"pbt": ("hyperparam_mutations", [0.1]), "pb2": ("hyperparam_bounds", [0, 1])}
    for kind in ("asha", "hyperband", "median", "pbt", "pb2"):
        for param in scheduler_parameters(kind):
            extra = {} if kind not in required or param == required[kind][0] else {required[kind][0]: {"x": required[kind][1]}}
            docs += [_doc(scheduler={"type": kind, param: value, **extra}) for value in WRONG]
    for key in ("sampler", "sampler_args", "points_to_evaluate"):
        docs += [_doc(search={"type": "optuna", key: value}) for value in WRONG]
    for name in DISTRIBUTIONS:
        docs += [_doc(config={"x": {name: value}}) for value in [*WRONG, [0, 1, 2, 3, 4], [1, 0], {"lower": 1}]]
    outcomes = [_outcome(doc) for doc in docs]  # anything else raised fails the test
    assert outcomes.count("error") > 0.8 * len(outcomes)
