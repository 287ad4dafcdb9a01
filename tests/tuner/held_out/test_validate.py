"""A sweep validated end to end: the follow-on sweep runs each best config on held-out seeds, on
SQLite and on PostgreSQL, is linked both ways, survives an interrupt, and answers `tuner validate`,
`tuner best --validated` and `best_config(by="validated")`."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.tuner.held_out.trainables import noisy
from tuner import tune
from tuner.cli import main
from tuner.held_out.plan import FIRST_HELD_OUT_SEED

pytestmark = pytest.mark.usefixtures("ray_session")

TRAINABLE = "tests.tuner.held_out.trainables:noisy"


def _sweep(tmp_path, name, database_url=None, **kwargs):
    # x = 0 .. 1.5 on seeds 0 and 1; noise 0.3: the ranking on fresh seeds follows x
    return tune.run(TRAINABLE, config={"x": tune.grid_search([0.0, 0.5, 1.0, 1.5]), "seed": tune.grid_search([0, 1]),
                                       "iterations": 2},
                    metric="score", mode="max", storage_path=str(tmp_path), name=name, database_url=database_url,
                    verbose=0, **kwargs)


class InterruptAfter(tune.Callback):
    """Ctrl-C in the driver once ``results`` results came in."""

    def __init__(self, results):
        self.left = results

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_validation_interrupted_then_resumed_reports_every_config_on_every_held_out_seed(tmp_path, backend,
                                                                                             request):
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    name = f"swept-{uuid.uuid4().hex[:6]}"
    _sweep(tmp_path, name, url).close()
    analysis = tune.load(tmp_path / name, database_url=url)
    with pytest.raises(KeyboardInterrupt):
        analysis.validate(top_k=3, seeds=4, callbacks=[InterruptAfter(3)])
    partial = analysis.validation()
    assert partial is not None and not partial.complete
    report = analysis.validate(top_k=3, seeds=4)  # resumed: the rest runs, nothing twice
    assert report.complete and report.name == f"{name}-validation"
    assert report.plan.seeds == tuple(range(FIRST_HELD_OUT_SEED, FIRST_HELD_OUT_SEED + 4))
    assert [c.candidate.config for c in report.configs] == [{"x": 1.5, "iterations": 2}, {"x": 1.0, "iterations": 2},
                                                            {"x": 0.5, "iterations": 2}]
    validation = tune.load(tmp_path / report.name, database_url=url)
    trials = validation.trials
    assert len(trials) == 12 and {t.status for t in trials} == {"TERMINATED"}
    assert len(validation.results_df) == 24  # every result stored exactly once across the interrupt
    for config in report.configs:  # each score is the trainable's on that seed, computed here by hand
        expected = [_final_score(config.candidate.config, seed) for seed in report.plan.seeds]
        assert list(config.scores) == pytest.approx(expected)
        assert config.ci_low <= config.iqm <= config.ci_high
    assert [c.held_out_rank for c in report.configs] == [1, 2, 3]
    assert analysis.get_best_config(by="validated") == {"x": 1.5, "iterations": 2}
    assert analysis.best_config["seed"] in (0, 1)  # the sweep's own answer keeps its trial's seed
    assert validation.validation().configs == report.configs  # the validation sweep knows its plan
    validation.close()
    analysis.close()


def _final_score(config, seed):
    from tests.tuner.held_out import trainables

    scores = []
    original = trainables.tune.report
    trainables.tune.report = lambda result: scores.append(result["score"])
    try:
        noisy({**config, "seed": seed})
    finally:
        trainables.tune.report = original
    return scores[-1]


def test_the_cli_validates_lists_resumes_and_answers_best_validated(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"trainable: {TRAINABLE}\nmetric: score\nmode: max\n"
                    "config:\n  x: {grid: [0.0, 1.0]}\n  seed: {grid: [0, 1, 2]}\n")
    storage = str(tmp_path / "runs")
    assert main(["sweep", str(spec), "--name", "cli", "--storage-path", storage, "--progress", "none"]) == 0
    capsys.readouterr()
    assert main(["validate", "cli", "--top-k", "2", "--seeds", "3", "--storage-path", storage,
                 "--progress", "none"]) == 0
    out = capsys.readouterr().out
    assert "validation cli-validation of sweep cli: score (max) on held-out seeds 10000..10002" in out
    assert "the sweep's best config is also the best on held-out seeds" in out
    assert main(["validate", "cli", "--top-k", "2", "--seeds", "3", "--storage-path", storage, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # read again: nothing runs twice
    assert data["complete"] and [c["sweep_rank"] for c in data["configs"]] == [1, 2]
    assert [c["held_out_rank"] for c in data["configs"]] == [1, 2] and data["configs"][0]["seeds"] == 3
    assert main(["best", "cli", "--validated", "--storage-path", storage, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"] == {"x": 1.0}
    assert main(["best", "cli", "--storage-path", storage]) == 0
    assert "--validated: the best on held-out seeds" in capsys.readouterr().out
    assert main(["ls", "--storage-path", storage]) == 0
    listed = capsys.readouterr().out
    assert "cli-validation" in listed and "6/6" in listed
    assert main(["resume", "cli-validation", "--storage-path", storage, "--progress", "none"]) == 0  # a sweep like any


@pytest.mark.parametrize("argv, said", [
    (["--seeds", "0"], "seeds must be an int >= 1"),
    (["--top-k", "0"], "top_k must be an int >= 1"),
])
def test_bad_requests_are_one_line_and_run_nothing(tmp_path, capsys, argv, said):
    _sweep(tmp_path, "bad").close()
    assert main(["validate", "bad", "--storage-path", str(tmp_path), *argv]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "bad-validation").exists()


def never_reports(config):
    raise RuntimeError("no result")


def test_a_sweep_with_no_finished_trial_cannot_be_validated(tmp_path, capsys):
    tune.register_trainable("held_out_never", never_reports)
    tune.run("held_out_never", config={"seed": tune.grid_search([0, 1])}, metric="score", mode="max",
             storage_path=str(tmp_path), name="none", verbose=0, raise_on_failed_trial=False).close()
    analysis = tune.load(tmp_path / "none")
    with pytest.raises(ValueError, match="validate: no trial of the sweep finished"):
        analysis.validate(top_k=2, seeds=3)
    with pytest.raises(ValueError, match="by='validated': sweep 'none' has no validation"):
        analysis.get_best_config(by="validated")
    analysis.close()
    assert not (tmp_path / "none-validation").exists()
