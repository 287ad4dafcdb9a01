"""The Atari benchmark runs ours in-process on a tiny budget and prints its table (its figures
are the benchmark's business, not this test's; SB3 is not installed here, and 8 rollout actors
each importing torch are too slow for a smoke test on 2 cores); its mapping of rl-zoo's
hyperparameters onto our keys is a valid config of our PPO, with actors and without."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "ppo_atari.py"


def _module():
    spec = importlib.util.spec_from_file_location("ppo_atari_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_atari_benchmark_prints_our_row_on_a_tiny_budget():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-sb3", "--systems", "inproc"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "PPO on ALE/Pong-v5, 2,048 env steps per system" in out and "ours only" in out, out
    # wall s, env steps, steps/s, after 1st, sample s, learn s, updates, upd/s, load, params, no SB3 ratios
    row = re.search(r"^ours, in-process\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)"
                    r"\s+([\d.]+)\s+([\d.]+)\s+([\d,]+)\s+-\s+-$", out, re.M)
    assert row, out
    assert int(row.group(2).replace(",", "")) >= 2048
    assert int(row.group(7)) == 2 * 4 * 1024 // 256  # 2 iterations of 4 epochs of 4 minibatches
    # the Nature CNN (1,684,128 parameters to the 512 features) and pi / vf layers of 64, heads of 6 and 1
    assert row.group(10) == "1,750,247", out


def test_zoo_hyperparameters_map_onto_valid_configs_of_ours():
    from algorithms import PPO

    bench = _module()
    for actors, layout in ((8, (8, 1)), (2, (2, 4)), (0, (0, 8))):
        config = bench.ours_config(bench.ZOO, 0, actors)
        assert (config["num_workers"], config["num_envs_per_worker"]) == layout
        assert config["sample_async"] is False and bench.ours_config(bench.ZOO, 0, actors, streams=True)["sample_async"]
        assert (config["train_batch_size"], config["minibatch_size"], config["num_epochs"]) == (1024, 256, 4)
        assert (config["clip_param"], config["entropy_coeff"], config["vf_loss_coeff"]) == (0.1, 0.01, 1.0)
        resolved = PPO.resolve_config(config)  # raises on a key or value ours does not take
        assert resolved["model"]["cnn"] == "nature" and resolved["model"]["hidden_sizes"] == [64]


def test_an_actor_count_that_does_not_divide_the_envs_is_refused():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-sb3", "--actors", "3"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert "--actors: must divide the 8 envs (allowed: 1, 2, 4, 8), got 3" in proc.stderr, proc.stderr
