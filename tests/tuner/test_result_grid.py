"""ResultGrid and Result give the same answers as ExperimentAnalysis on the same sweep."""

from __future__ import annotations

import pandas as pd
import pytest

from tuner import tune

# One curve per trial, chosen so that each scope has another winner (mode "max"):
#   last -> B (6), all -> A (10), avg and last-10-avg -> C (3.33), last-5-avg -> D (3.4).
CURVES = {
    "A": [10, 0, 0, 0, 0, 0],
    "B": [0, 0, 0, 0, 0, 6],
    "C": [5, 3, 3, 3, 3, 3],
    "D": [0, 4, 4, 4, 4, 1],
    "E": [1, 2],  # then fails
}
WINNERS = {"last": "B", "all": "A", "avg": "C", "last-10-avg": "C", "last-5-avg": "D"}


def follow_curve(config):
    for i, score in enumerate(CURVES[config["curve"]]):
        tune.report({"score": score, "nested": {"half": score / 2}, "i": i})
    if config["curve"] == "E":
        raise ValueError("curve E ends in an error")


@pytest.fixture(scope="module")
def grid(ray_session, tmp_path_factory):
    storage = tmp_path_factory.mktemp("grid")
    tuner = tune.Tuner(
        tune.with_resources(follow_curve, {"cpu": 0.5}),
        param_space={"curve": tune.grid_search(list(CURVES))},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(storage), name="curves", verbose=0, tensorboard=False),
    )
    grid = tuner.fit()
    yield grid, tune.load(storage / "curves"), tuner
    grid.analysis.close()


def _without_config(metrics):
    return {k: v for k, v in metrics.items() if k != "config"}


def test_best_result_agrees_with_the_analysis_for_every_scope(grid):
    grid, analysis, _ = grid
    for scope, winner in WINNERS.items():
        best = grid.get_best_result(scope=scope)
        trial = analysis.get_best_trial("score", "max", scope=scope)
        assert best.config == trial.config == {"curve": winner}, scope
        assert _without_config(best.metrics) == trial.last_result
        assert best.metrics["config"] == best.config  # as in Ray Tune
    # Explicit metric and mode (a nested metric, flattened), against the analysis too.
    for mode in ("min", "max"):
        best = grid.get_best_result("nested/half", mode, scope="avg")
        assert best.config == analysis.get_best_config("nested/half", mode, scope="avg")
    assert analysis.best_result == _without_config(grid.get_best_result().metrics)


def test_dataframes_agree_with_the_analysis(grid):
    grid, analysis, _ = grid
    df = grid.get_dataframe()
    pd.testing.assert_frame_equal(df, analysis.dataframe())
    assert len(df) == 5 and sorted(df["config/curve"]) == list(CURVES)
    assert dict(zip(df["config/curve"], df["score"])) == {c: v[-1] for c, v in CURVES.items()}
    best_rows = grid.get_dataframe(filter_metric="score", filter_mode="max")
    pd.testing.assert_frame_equal(best_rows, analysis.dataframe("score", "max"))
    assert dict(zip(best_rows["config/curve"], best_rows["score"])) == {c: max(v) for c, v in CURVES.items()}
    for result in grid:
        expected = analysis.trial_dataframes[result.trial_id]
        pd.testing.assert_frame_equal(result.metrics_dataframe, expected)
        assert list(result.metrics_dataframe["score"]) == CURVES[result.config["curve"]]


def test_grid_indexing_errors_and_counts(grid):
    grid, analysis, tuner = grid
    assert len(grid) == 5 and [r.config["curve"] for r in grid] == list(CURVES)
    assert grid[1].config == {"curve": "B"} and grid[-1].config == {"curve": "E"}
    assert (grid.num_terminated, grid.num_errors) == (4, 1)
    [error] = grid.errors
    assert isinstance(error, tune.TuneError) and "curve E ends in an error" in str(error)
    assert grid[4].error is error and all(r.error is None for r in grid[:4])
    assert set(analysis.errors) == {grid[4].trial_id}
    assert grid.experiment_path == analysis.experiment_path
    assert all(r.path == t.trial_dir and r.path.startswith(grid.experiment_path) for r, t in zip(grid, analysis.trials))
    assert all(r.checkpoint is None and r.best_checkpoints == [] for r in grid)
    again = tuner.get_results()  # read back from the store
    assert [r.metrics for r in again] == [r.metrics for r in grid]


def test_bad_scope_metric_or_mode_is_one_clear_error(grid):
    grid, _, _ = grid
    with pytest.raises(ValueError, match=r"scope must be one of \['all', 'last', 'avg', 'last-5-avg', 'last-10-avg'\]"):
        grid.get_best_result(scope="best")
    with pytest.raises(ValueError, match="mode must be one of"):
        grid.get_best_result("score", "maximum")
    with pytest.raises(ValueError, match="filter_metric and filter_mode go together"):
        grid.get_dataframe(filter_metric="score")
    with pytest.raises(RuntimeError, match="no best trial for metric 'nothing'"):
        grid.get_best_result("nothing", "max")
