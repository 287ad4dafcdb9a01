"""benchmarks/pack_learner.py times one PPO pack's learner (numpy, its torch twin; CUDA where there
is one) on a tiny budget and prints a row per system with its ratio to numpy's; bad flags are one
line naming them."""

from __future__ import annotations

import re

import pytest
import torch

from benchmarks.pack_learner import main
from tests.benchmarks.scripts import bad_flags_error


def test_pack_learner_prints_a_row_per_system_and_the_twins_learn_alike(capsys):
    main(["--members", "2", "--iterations", "1", "--repeat", "1"])
    out = capsys.readouterr().out
    rows = {m.group(1): m for m in re.finditer(r"^  (\S+) +([\d.]+) s an iteration +\[[\d.-]+\] +([\d.]+)x numpy's"
                                               r" +mean return +([\d.]+)$", out, re.M)}
    assert set(rows) == {"numpy", "torch-cpu"} | ({"torch-cuda"} if torch.cuda.is_available() else set()), out
    assert rows["numpy"].group(3) == "1.00" and rows["torch-cpu"].group(4) == rows["numpy"].group(4), out


@pytest.mark.parametrize("flag", ["--members", "--iterations", "--repeat", "--threads"])
def test_bad_flags_are_one_line_naming_them(flag):
    assert f"{flag}: must be > 0, got 0" in bad_flags_error("pack_learner.py", flag, "0")
