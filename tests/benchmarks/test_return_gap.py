"""The return-gap benchmark runs ours on a tiny budget, saves its runs and reads them back next to
a new run (its figures are the benchmark's business, not this test's)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "return_gap.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_return_gap_prints_each_variant_and_the_paired_differences(tmp_path):
    saved = tmp_path / "runs.json"
    tiny = ["--variants", "sync", "--seeds", "2", "--lrs", "2.5e-3", "--steps", "2500"]
    first = run(*tiny, "--save", str(saved))
    assert first.returncode == 0, first.stdout + first.stderr
    runs = json.loads(saved.read_text())["runs"]["sync"]
    assert len(runs) == 2 and all(r["curve"][-1][0] >= 2500 for r in runs)
    second = run(*tiny, "--load", f"{saved}:before")
    assert second.returncode == 0, second.stdout + second.stderr
    out = second.stdout
    # variant, runs, mean, median, SE, min-max, the lr's mean, batch, stale
    rows = {m.group(1): m for m in re.finditer(r"^(\S+)\s+2\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+\d+-\d+\s+([\d.]+)\s+\d+\s+-$",
                                                 out, re.M)}
    assert set(rows) == {"sync@before", "sync"}, out
    # the same seeds, in-process and seeded: the same runs again, so every paired difference is 0
    assert re.search(r"^sync@before\s+sync\s+2\s+\+0\.0\s+0\.0", out, re.M), out


def test_return_gap_rejects_bad_flags():
    for args, message in ((["--variants", "sync,foo"], "--variants: unknown ['foo'] (allowed: sb3, sync, stream)"),
                          (["--slow-prob", "1.5"], "--slow-prob: must be a probability in [0, 1], got 1.5"),
                          (["--seeds", "0"], "argument --seeds: must be an int >= 1, got 0")):
        proc = run(*args)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr, proc.stderr
