"""Checkpoint retention (num_to_keep): each trial keeps its N best checkpoints on disk, the store
records every checkpoint and which were deleted, and a trial that may still run keeps its latest."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tuner import tune
from tuner.execution.checkpoint_manager import CheckpointManager, rank_checkpoints
from tuner.store import Store, default_database_url

SCORES = [3, 9, 1, 7, 5, 2]  # the best two are iterations 2 (9) and 4 (7); the last (2) is not


def _checkpoint_dirs(trial_dir: str) -> list[str]:
    return sorted(p.name for p in Path(trial_dir).iterdir() if p.name.startswith("checkpoint_"))


def report_scores(config):
    for i, score in enumerate(SCORES):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "score.json").write_text(json.dumps(score))
            tune.report({"score": score * config["scale"], "i": i}, checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.usefixtures("ray_session")
def test_num_to_keep_2_leaves_the_best_two_checkpoints_of_each_trial(tmp_path):
    grid = tune.Tuner(
        tune.with_resources(report_scores, {"cpu": 0.5}),
        param_space={"scale": tune.grid_search([1, -1])},  # scale -1 turns the ranking upside down
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="keep2", verbose=0, tensorboard=False,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="score"),
        ),
    ).fit()
    analysis = grid.analysis
    expected = {1: ["checkpoint_000002", "checkpoint_000004"], -1: ["checkpoint_000003", "checkpoint_000006"]}
    for result in grid:
        scale = result.config["scale"]
        assert _checkpoint_dirs(result.path) == expected[scale]
        # The store knows every checkpoint, and which were deleted.
        records = analysis.checkpoints(result.trial_id, include_deleted=True)
        assert [r["iteration"] for r in records] == [1, 2, 3, 4, 5, 6]
        kept = sorted(Path(r["path"]).name for r in records if not r["deleted"])
        assert kept == expected[scale]
        assert all(r["deleted_at"] and not os.path.exists(r["path"]) for r in records if r["deleted"])
        # best_checkpoints: the kept ones with their metrics, worst to best (Ray Tune's order).
        assert [m["score"] for _, m in result.best_checkpoints] == ([7, 9] if scale == 1 else [-2, -1])
        assert all(json.loads(Path(c.path, "score.json").read_text()) * scale == m["score"]
                   for c, m in result.best_checkpoints)
        assert result.get_best_checkpoint("score", "max") == result.best_checkpoints[-1][0]
        # The trial's checkpoint is one on disk: its newest kept once it finished.
        assert result.checkpoint is not None and Path(result.checkpoint.path).name == expected[scale][-1]
        assert [t.checkpoint_path for t in analysis.trials if t.trial_id == result.trial_id] == [result.checkpoint.path]
    analysis.close()


class Noisy(tune.Trainable):
    """Loss is not monotonic; fails once at iteration 5 (before a marker file exists)."""

    LOSSES = [5.0, 1.0, 2.0, 6.0, 7.0, 3.0, 4.0]

    def setup(self, config):
        self.i = 0

    def step(self):
        if self.i == 4 and not os.path.exists(self.config["marker"]):
            Path(self.config["marker"]).touch()
            raise RuntimeError("failing once at iteration 5")
        loss = self.LOSSES[self.i]
        self.i += 1
        return {"loss": loss, "done": self.i == len(self.LOSSES)}

    def save_checkpoint(self, checkpoint_dir):
        return {"i": self.i}

    def load_checkpoint(self, checkpoint):
        self.i = checkpoint["i"]


@pytest.mark.usefixtures("ray_session")
def test_legacy_arguments_and_the_latest_checkpoint_survives_for_a_retry(tmp_path):
    """tune.run(keep_checkpoints_num=2, checkpoint_score_attr="min-loss"): a failure at iteration 5
    restarts from the latest checkpoint (iteration 4, the worst so far: kept all the same)."""
    analysis = tune.run(
        Noisy, config={"marker": str(tmp_path / "failed-once")}, checkpoint_freq=1, max_failures=1,
        keep_checkpoints_num=2, checkpoint_score_attr="min-loss", resources_per_trial={"cpu": 0.5},
        storage_path=str(tmp_path), name="legacy", verbose=0, tensorboard=False,
    )
    [trial] = analysis.trials
    assert trial.status == "TERMINATED" and trial.num_failures == 1
    assert list(analysis.trial_dataframes[trial.trial_id]["loss"]) == Noisy.LOSSES  # resumed at iteration 5
    assert _checkpoint_dirs(trial.trial_dir) == ["checkpoint_000002", "checkpoint_000003"]  # losses 1.0 and 2.0
    records = analysis.checkpoints(trial.trial_id, include_deleted=True)
    assert [r["iteration"] for r in records] == [1, 2, 3, 4, 5, 6, 7]
    assert (analysis.spec["keep_checkpoints_num"], analysis.spec["checkpoint_score_attribute"],
            analysis.spec["checkpoint_score_order"]) == (2, "loss", "min")
    analysis.close()


def test_manager_keeps_the_latest_while_running_and_protected_checkpoints(tmp_path):
    """The rules without Ray: newest N without a score attribute; the latest and checkpoints
    another trial points at are never deleted; finish trims to N; a resumed manager goes on."""
    run_dir = tmp_path / "run"
    store = Store(default_database_url(run_dir))
    eid = store.get_or_create_experiment("e", spec={}, metric=None, mode=None)

    def make(trial, i):
        path = run_dir / trial / f"checkpoint_{i:06d}"
        path.mkdir(parents=True)
        return str(path)

    newest = CheckpointManager(store, eid, str(run_dir), num_to_keep=2)
    for i in range(1, 5):
        newest.register("a", make("a", i), i, {"i": i}, protected=set)
    assert [Path(r.path).name for r in newest.kept("a")] == ["checkpoint_000003", "checkpoint_000004"]

    best = CheckpointManager(store, eid, str(run_dir), num_to_keep=1, score_attribute="acc")
    exploited = make("b", 1)  # another trial restored from it (a PBT exploit): it stays
    best.register("b", exploited, 1, {"acc": 0.1}, protected=set)
    best.register("b", make("b", 2), 2, {"acc": 0.9}, protected=lambda: {exploited})
    assert len(best.kept("b")) == 2 and os.path.isdir(exploited)
    best.register("b", make("b", 3), 3, {"acc": float("nan")}, protected=set)  # NaN ranks last, but latest
    assert sorted(Path(r.path).name for r in best.kept("b")) == ["checkpoint_000002", "checkpoint_000003"]
    top = str(run_dir / "b" / "checkpoint_000002")
    assert best.finish("b", protected=set) == top  # trimmed to the best one, which it now points at
    assert [r.path for r in best.kept("b")] == [top] and not os.path.exists(exploited)

    resumed = CheckpointManager(store, eid, str(run_dir), num_to_keep=2)
    resumed.load()
    assert {Path(r.path).name for r in resumed.kept("a")} == {"checkpoint_000003", "checkpoint_000004"}
    deleted = {Path(r["path"]).name for r in store.checkpoints(eid, "b") if r["deleted"]}
    assert deleted == {"checkpoint_000001", "checkpoint_000003"}
    records = [r for r in resumed.kept("a")]
    assert rank_checkpoints(records, None) == records  # oldest first without an attribute
    store.close()
