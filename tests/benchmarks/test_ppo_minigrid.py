"""The MiniGrid benchmark runs ours on a tiny budget and prints its table (its figures are the
benchmark's business, not this test's; SB3 is not installed here); its mapping of rl-zoo's
hyperparameters onto our keys is a valid config of our PPO."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "ppo_minigrid.py"


def _module():
    spec = importlib.util.spec_from_file_location("ppo_minigrid_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_minigrid_benchmark_prints_our_rows_on_a_tiny_budget():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-sb3"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "ours only" in out, out
    assert "PPO on MiniGrid-DoorKey-5x5-v0: solved = mean return of the last 100 episodes >= 0.9 within 4,096 " \
           "env steps" in out, out
    line = re.search(r"^  ours seed 0: not within 4,096 env steps, - s to the rule, ([\d.]+) s total \(([\d,]+) "
                     r"env steps, torch threads 1, load [\d.]+ at start", out, re.M)
    assert line, out
    assert int(line.group(2).replace(",", "")) >= 4096
    # ours' network: the small CNN (3 convs, Linear 256 -> 512) on the image, the one-hot direction, 64x64 MLPs
    assert "network parameters: ours 610,360" in out, out
    assert re.search(r"^\s+0\s+not within 4,096\s+-\s+[\d.]+\s+-\s+-\s+-\s+-\s+-$", out, re.M), out
    assert re.search(r"^med\.\s+not within 4,096\s+-\s+-\s+-\s+-\s+-$", out, re.M), out
    assert "ours solved 0/1 seeds" in out, out


def test_zoo_hyperparameters_map_onto_a_valid_config_of_ours():
    from algorithms import PPO

    bench = _module()
    config = bench.ours_config(bench.HPS["starter"], 3)
    assert (config["num_envs_per_worker"], config["train_batch_size"], config["minibatch_size"],
            config["num_epochs"]) == (16, 2048, 256, 4)
    assert (config["lr"], config["clip_param"], config["entropy_coeff"], config["vf_loss_coeff"]) == (1e-3, 0.2, 0.01,
                                                                                                      1.0)
    assert config["env"] == "MiniGrid-DoorKey-5x5-v0" and config["optimizer_config"] == {"eps": 1e-8}
    resolved = PPO.resolve_config(config)  # raises on a key or value ours does not take
    assert resolved["model"]["cnn"] == "small" and resolved["seed"] == 3
    zoo = bench.ours_config(bench.HPS["zoo"], 0, factor=25)
    assert (zoo["num_envs_per_worker"], zoo["train_batch_size"], zoo["minibatch_size"], zoo["num_epochs"]) == (8, 1024,
                                                                                                         64, 10)
    resolved = PPO.resolve_config(zoo)
    assert resolved["preprocessing"] == {"image_scale": 25} and resolved["env"] == "MiniGrid-DoorKey-5x5-v0"


def test_sb3_gets_the_observations_our_preset_gives():
    """SB3's wrapper (FilterObservation, then the codes x 25) and our preset's env see the same grid."""
    import gymnasium as gym
    import numpy as np
    from gymnasium.wrappers import FilterObservation

    from algorithms import PPO

    bench = _module()
    ours = PPO.prepare_trial({"env": bench.ENV}).env({})
    theirs = bench.scaled_image(FilterObservation(gym.make(bench.ENV), ["direction", "image"]), 25)
    try:
        ours_obs, _ = ours.reset(seed=0)
        theirs_obs, _ = theirs.reset(seed=0)
    finally:
        ours.close()
        theirs.close()
    assert ours_obs["image"].dtype == np.uint8 and ours_obs["image"].max() % 25 == 0
    np.testing.assert_array_equal(ours_obs["image"], theirs_obs["image"])
    assert ours_obs["direction"] == theirs_obs["direction"]
