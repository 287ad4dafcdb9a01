"""A sweep that fails a check before any trial reported leaves nothing behind, so the corrected
call can reuse its name; once results exist they are kept, and nothing is called finished."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def train(config):
    for i in range(3):
        tune.report({"score": config.get("x", 1) * i, "loss": -i})


def train_text_metric(config):
    tune.report({"score": 1.0})
    tune.report({"score": 2.0})
    tune.report({"score": "high"})


def _run(tmp_path, trainable=train, **kwargs):
    kwargs = {"metric": "score", "mode": "max", "storage_path": str(tmp_path), "name": "checked", "verbose": 0,
              **kwargs}
    return tune.run(trainable, **kwargs)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"metric": "scor"}, r"metric 'scor' was never reported: the first result .* holds only \['loss', 'score'\]"),
        ({"stop": {"epochs": 3}}, "stop: key 'epochs' was never reported"),
        ({"resources_per_trial": {"cpu": 64}}, "fits on no node of the cluster.*could never start"),
    ],
    ids=["metric", "stop-key", "resources"],
)
def test_a_failed_check_leaves_nothing_and_the_name_stays_free(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        _run(tmp_path, **bad)
    assert not (tmp_path / "checked").exists()
    analysis = _run(tmp_path)  # the corrected sweep, same name, no resume=True needed
    assert [t.status for t in analysis.trials] == ["TERMINATED"] and len(analysis.results_df) == 3


def test_a_metric_that_is_not_a_number_is_refused_and_earlier_results_kept(tmp_path):
    with pytest.raises(ValueError, match=r"metric 'score' must be a number: trial .* reported 'high' \(str\) "
                                         r"at iteration 3"):
        _run(tmp_path, train_text_metric)
    analysis = tune.load(tmp_path / "checked")
    (trial,) = analysis.trials
    assert trial.status == "INTERRUPTED"  # cut short by the sweep's failure, not finished
    assert list(analysis.results_df["score"]) == [1.0, 2.0]
    analysis.close()


def text_first(config):
    tune.report({"score": "high"})


def test_a_text_metric_in_the_first_result_leaves_nothing(tmp_path):
    with pytest.raises(ValueError, match="metric 'score' must be a number"):
        _run(tmp_path, text_first)
    assert not (tmp_path / "checked").exists()


@pytest.mark.parametrize(
    "config, match",
    [
        ({"env": "CartPole-v1", "lr_typo": 1e-3}, "unknown key 'lr_typo'"),
        ({"env": "NoSuchEnv-v0"}, "env: 'NoSuchEnv-v0' is neither a gymnasium id"),
    ],
    ids=["config-key", "env-id"],
)
def test_a_bad_trainer_config_fails_in_the_driver_and_leaves_nothing(tmp_path, config, match):
    with pytest.raises(ValueError, match=match):
        tune.run("PPO", config=config, storage_path=str(tmp_path), name="ppo", verbose=0)
    assert not (tmp_path / "ppo").exists()


def test_a_failed_check_on_a_shared_database_removes_its_rows(tmp_path, postgres_url):
    name = f"checked_{tmp_path.name[-12:]}"
    with pytest.raises(ValueError, match="was never reported"):
        _run(tmp_path, metric="scor", database_url=postgres_url, name=name)
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            left = conn.execute(sa.text("SELECT COUNT(*) FROM experiments WHERE name = :n"), {"n": name}).scalar()
    finally:
        engine.dispose()
    assert left == 0
    analysis = _run(tmp_path, database_url=postgres_url, name=name)
    assert len(analysis.results_df) == 3
    analysis.close()


def test_an_existing_sweep_is_never_removed_by_a_failed_resume(tmp_path):
    with pytest.raises(ValueError, match="metric 'score' must be a number"):
        _run(tmp_path, train_text_metric)
    with pytest.raises(ValueError, match="metric 'score' must be a number"):
        _run(tmp_path, train_text_metric, resume=True)
    analysis = tune.load(tmp_path / "checked")
    assert list(analysis.results_df["score"]) == [1.0, 2.0]
    analysis.close()
