"""What a failure path may remove of a sweep's directory: only what the engine writes before any
result, and then all of it; anything else keeps the whole directory."""

from __future__ import annotations

import logging

from tuner.execution.leftovers import remove_if_only_engine_files, user_file_in


def _tree(root, *files):
    for name in files:  # "dir/" is an empty directory
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")


def test_a_directory_of_engine_files_is_removed(tmp_path):
    run_dir = tmp_path / "sweep"
    _tree(run_dir, "driver.lock", "tuner.db", "tuner.db-wal", "sweep.yaml",
          "tensorboard/events.out.tfevents.1.host", "trial_0/")
    assert user_file_in(run_dir) is None
    assert remove_if_only_engine_files(run_dir) and not run_dir.exists()
    assert remove_if_only_engine_files(run_dir)  # gone already: nothing to do


def test_a_checkpoint_or_a_trials_own_file_keeps_everything(tmp_path, caplog):
    for kept in ("trial_0/checkpoint_000001/state.json", "trial_1/stdout.log"):
        run_dir = tmp_path / kept.replace("/", "_")
        _tree(run_dir, "tuner.db", "sweep.yaml", kept)
        with caplog.at_level(logging.WARNING):
            assert not remove_if_only_engine_files(run_dir)
        assert (run_dir / kept).is_file() and (run_dir / "tuner.db").is_file() and (run_dir / "sweep.yaml").is_file()
        assert f"kept {run_dir}: it holds {run_dir / kept}" in caplog.text


def test_with_only_locks_allowed_a_spec_or_log_keeps_everything_quietly(tmp_path, caplog):
    run_dir = tmp_path / "sweep"
    _tree(run_dir, "driver.lock", "sweep.yaml")
    with caplog.at_level(logging.WARNING):
        assert not remove_if_only_engine_files(run_dir, ("*.lock",), say_kept=False)
    assert (run_dir / "sweep.yaml").is_file() and not caplog.text
    (run_dir / "sweep.yaml").unlink()
    assert remove_if_only_engine_files(run_dir, ("*.lock",)) and not run_dir.exists()
