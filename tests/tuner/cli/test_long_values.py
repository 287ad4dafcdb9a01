"""A config with a very long value: printed shortened (saying how long it was) by the sweep's
progress and summary, `tuner show` and `tuner best`; stored, exported and loaded whole."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from tests.tuner.cli import cli_trainables
from tests.tuner.cli.conftest import cli, query_rows
from tuner import tune
from tuner.cli.live import LiveTable
from tuner.execution.progress import ProgressReporter

pytestmark = pytest.mark.usefixtures("ray_session")

BLOB = "a" * 1_000_000 + "z"
TAGS = ["t" * 300 + "1", "t" * 300 + "2"]
SPEC = f"""\
trainable: tests.tuner.cli.cli_trainables:quadratic
metric: score
mode: max
resources: {{cpu: 0.5}}
config:
  x: 0.5
  tag: {{grid_search: {json.dumps(TAGS)}}}
  blob: "{BLOB}"
  iterations: 2
"""


def _short_lines(text: str, most: int = 400) -> None:
    long = [line[:100] + "..." for line in text.splitlines() if len(line) > most]
    assert not long, long


def test_long_config_values_are_printed_short_and_kept_whole(tmp_path, ray_address):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    storage = tmp_path / "results"
    proc = cli("sweep", str(spec), "--name", "long", "--address", ray_address, "--storage-path", str(storage))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _short_lines(proc.stdout + proc.stderr)
    assert "<1,000,001 chars>" in next(x for x in proc.stdout.splitlines() if x.startswith("best config: "))
    assert "RUNNING tag=tttt" in proc.stdout and "<301 chars>" in proc.stdout  # the plain progress lines

    shown = cli("show", "long", "--storage-path", str(storage))
    assert shown.returncode == 0, shown.stderr
    _short_lines(shown.stdout)
    best_line = next(x for x in shown.stdout.splitlines() if x.startswith("best: "))
    assert "<1,000,001 chars>" in best_line and "<301 chars>" in best_line

    best = cli("best", "long", "--storage-path", str(storage))
    assert best.returncode == 0, best.stderr
    _short_lines(best.stdout)
    assert "blob: aaaa" in best.stdout and "<1,000,001 chars>" in best.stdout

    # the data stay whole: the export, `best --json` (for scripts) and the Python API
    exported = json.loads(cli("export", "long", "--format", "json", "--what", "trials",
                              "--storage-path", str(storage)).stdout)
    assert [row["config/blob"] for row in exported] == [BLOB, BLOB]
    assert json.loads(cli("best", "long", "--json", "--storage-path", str(storage)).stdout)["config"]["blob"] == BLOB
    with tune.load(storage / "long") as analysis:
        assert sorted(t.config["tag"] for t in analysis.trials) == TAGS
        assert all(t.config["blob"] == BLOB for t in analysis.trials)
    # a plain-data config is stored once (as JSON), not a second time as a pickle
    rows = query_rows(storage / "long" / "tuner.db", "SELECT length(config), config_blob FROM trials")
    assert [(n > len(BLOB), blob) for n, blob in rows] == [(True, None), (True, None)]


def test_live_table_and_tune_run_progress_print_long_values_short(tmp_path):
    note = "n" * 500_000
    live_out = io.StringIO()
    table = LiveTable("long", "score", "max", ["note"], console=Console(file=live_out, force_terminal=True, width=400))
    reporter_out = io.StringIO()
    reporter = ProgressReporter(verbose=3, metric="note", out=reporter_out, interval_s=0.0)
    frames: list[str] = []

    class Snapshot(tune.Callback):  # what the table shows while the trial runs
        def on_trial_result(self, iteration, trials, trial, result, **info):
            console = Console(file=io.StringIO(), width=400, color_system=None)
            console.print(table.render())
            frames.append(console.file.getvalue())

    tune.run(cli_trainables.echo_note, config={"x": 0.5, "note": note}, metric="score", mode="max",
             resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="long_live", verbose=0,
             callbacks=[table, reporter, Snapshot()], tensorboard=False)
    assert frames and all("<500,000 chars>" in frame for frame in frames)
    _short_lines("".join(frames) + live_out.getvalue())
    printed = reporter_out.getvalue()
    assert "iter 2: note=nnnn" in printed and "<500,000 chars>" in printed
    _short_lines(printed)
