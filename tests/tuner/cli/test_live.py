"""The live progress table, fed by a real sweep's callback hooks."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from tests.tuner.cli import cli_trainables
from tuner import tune
from tuner.cli.live import LiveTable, PlainProgress, make_progress

pytestmark = pytest.mark.usefixtures("ray_session")


def test_live_table_shows_statuses_running_trials_best_and_rate(tmp_path):
    out = io.StringIO()
    table = LiveTable("live", "score", "max", ["x"], console=Console(file=out, force_terminal=True, width=140))
    frames = []

    class Snapshot(tune.Callback):  # what the table shows while trials run
        def on_trial_result(self, iteration, trials, trial, result, **info):
            if len(frames) < 50:
                console = Console(file=io.StringIO(), width=140, color_system=None)
                console.print(table.render())
                frames.append(console.file.getvalue())

    tune.run(
        cli_trainables.quadratic, config={"x": tune.grid_search([0.1, 0.6, 0.9]), "iterations": 4, "sleep": 0.05},
        metric="score", mode="max", resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="live",
        verbose=0, callbacks=[table, Snapshot()], tensorboard=False,
    )
    running = [f for f in frames if "RUNNING" in f.splitlines()[0]]
    assert running, frames
    frame = running[-1]
    header, best, columns = frame.splitlines()[:3]
    assert header.startswith("sweep live") and "trials:" in header and "results/s" in header
    assert best.startswith("best score=") and "iter" in best
    assert columns.split() == ["trial", "status", "iter", "score", "x"]
    assert any(line.split()[1:2] == ["RUNNING"] for line in frame.splitlines()[3:])
    final = Console(file=io.StringIO(), width=140, color_system=None)
    final.print(table.render())
    text = final.file.getvalue()
    assert "3 TERMINATED" in text and "quadratic_" in text  # the best finished trials once none runs
    assert "best score=-0.04 (quadratic_" in text  # by the latest results: x=0.6 after 4 steps, -(0.1^2)*4
    assert table._live is None  # stopped at the sweep's end
    assert "live" in out.getvalue() and "3 TERMINATED" in out.getvalue()  # drawn on the (forced) terminal


def test_progress_is_plain_lines_when_stdout_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert isinstance(make_progress("auto", "n", "score", "max"), PlainProgress)
    assert isinstance(make_progress("live", "n", "score", "max"), LiveTable)
    assert make_progress("none", "n", "score", "max") is None


def test_both_displays_show_the_line_the_sweep_says_once_on_packing(tmp_path):
    live_out, plain_out = io.StringIO(), io.StringIO()
    table = LiveTable("packed", "episode_return_mean", "max", console=Console(file=live_out, width=200, color_system=None))
    plain = PlainProgress("packed", "episode_return_mean", "max", out=plain_out)
    tune.run("PPO", config={"env": "CartPole-v1", "num_envs_per_worker": 4, "train_batch_size": 64, "minibatch_size": 32,
                            "num_epochs": 1, "hidden_sizes": [16], "seed": 0, "lr": tune.grid_search([1e-3, 3e-3])},
             stop={"training_iteration": 1}, storage_path=str(tmp_path), name="packed", verbose=0, tensorboard=False,
             callbacks=[table, plain], pack_trials=2)
    line = "pack_trials=2: trials of PPO run packed, up to 2 to a process"
    assert plain_out.getvalue().count(line) == 1, plain_out.getvalue()
    assert live_out.getvalue().count(line) == 1, live_out.getvalue()
