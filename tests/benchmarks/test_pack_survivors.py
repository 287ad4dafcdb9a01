"""benchmarks/pack_survivors.py times a pack whose scheduler stopped all but some members against
those members packed alone, on a tiny budget, a row per trainer and env; bad flags are one line
naming them."""

from __future__ import annotations

import re

import pytest

from benchmarks.pack_survivors import ENVS, main
from tests.benchmarks.scripts import bad_flags_error


def test_pack_survivors_prints_a_row_per_env_with_the_ratio(capsys):
    main(["--members", "3", "--iterations", "1", "--repeat", "1", "--trainers", "PPO"])
    out = capsys.readouterr().out
    rows = re.findall(r"^  PPO  (\S+) +pack of +3: +([\d.]+) s +\[[\d.-]+\] +pack of +1: +([\d.]+) s +\[[\d.-]+\] +"
                      r"([\d.]+)x$", out, re.M)
    assert [row[0] for row in rows] == list(ENVS), out
    for _, big, small, ratio in rows:  # the times are printed rounded to the millisecond
        assert float(ratio) == pytest.approx(float(big) / float(small), rel=0.05), out


@pytest.mark.parametrize("args, message", [
    (["--members", "0"], "--members: must be > 0, got 0"),
    (["--learning", "0"], "--learning: must be > 0, got 0"),
    (["--members", "2", "--learning", "3"], "--learning: at most --members (2), got 3"),
    (["--trainers", "PPO,SAC"], "--trainers: a comma-separated subset of PPO, DQN, got 'PPO,SAC'"),
])
def test_bad_flags_are_one_line_naming_them(args, message):
    assert message in bad_flags_error("pack_survivors.py", *args)
