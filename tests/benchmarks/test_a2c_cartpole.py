"""The A2C benchmark runs ours on a tiny budget and prints its table (SB3 is not installed here);
its mapping of rl-zoo's settings is a valid config of our A2C."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "a2c_cartpole.py"


def test_a2c_benchmark_prints_our_row_on_a_tiny_budget():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-sb3"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "=== A2C on CartPole-v1: solved = mean return of the last 100 episodes >= 400 within 800 env steps, " \
           "checked after every round (a batch of 8 envs x 5 steps and its update)" in out, out
    assert re.search(r"^  ours seed 0: not within 800 env steps, - s to the rule, [\d.]+ s total \(8\d\d env steps",
                     out, re.M), out
    assert "ours solved 0/1 seeds within 800 env steps" in out, out


def test_zoo_settings_map_onto_a_valid_config_of_ours():
    from algorithms import A2C

    spec = importlib.util.spec_from_file_location("a2c_benchmark", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec.loader.exec_module(bench)
    resolved = A2C.resolve_config(bench.ours_a2c_config(bench.A2C_ZOO, 200_000))
    assert (resolved["train_batch_size"], resolved["num_envs_per_worker"], resolved["lambda_"]) == (40, 8, 1.0)
    assert (resolved["optimizer"], resolved["optimizer_config"]) == ("rmsprop", {"alpha": 0.99, "eps": 1e-5})


def test_bad_flags_are_one_line_naming_the_flag():
    for args, message in ((["--seeds", "a"], "--seeds: comma-separated ints, got 'a'"),
                          (["--threads", "0"], "--threads: must be >= 1, got 0"),
                          (["--max-steps", "0"], "--max-steps: must be >= 1, got 0")):
        proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                              cwd=ROOT)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
