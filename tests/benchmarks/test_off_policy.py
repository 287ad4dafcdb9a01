"""The off-policy benchmark runs ours (DQN, SAC, TD3) on tiny budgets and prints its tables (its figures
are the benchmark's business, not this test's; SB3 is not installed here); its mapping of rl-zoo's
hyperparameters onto our keys is a valid config of our trainers."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "off_policy.py"


def _module():
    spec = importlib.util.spec_from_file_location("off_policy_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_off_policy_benchmark_prints_our_rows_on_a_tiny_budget():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-sb3", "--algos", "dqn,sac,td3"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "ours only" in out, out
    for name, env, window, target, cap in (("DQN", "CartPole-v1", 100, "400", "2,048"),
                                           ("SAC", "Pendulum-v1", 10, "-200", "400"),
                                           ("TD3", "Pendulum-v1", 10, "-200", "400")):
        assert f"=== {name} on {env}: solved = mean return of the last {window} episodes >= {target} within {cap} " \
               f"env steps" in out, out
        # the per-seed progress line: the run went to its cap, with the torch threads asked for
        section = out[out.index(f"=== {name}"):]
        line = re.search(rf"^  ours seed 0: not within {cap} env steps, - s to the rule, ([\d.]+) s total "
                         r"\(([\d,]+) env steps, torch threads 1; best (\d+)-episode mean", section, re.M)
        assert line, out
        assert int(line.group(2).replace(",", "")) >= int(cap.replace(",", ""))
        assert int(line.group(3)) == window
        # the table: a row for seed 0 and the medians, SB3's columns empty
        assert re.search(rf"^\s+0\s+not within {cap}\s+-\s+[\d.]+\s+-\s+-\s+-\s+-\s+-$", out, re.M), out
        assert re.search(rf"^med\.\s+not within {cap}\s+-\s+[\d.]+\s+-", out, re.M), out
        assert f"ours solved 0/1 seeds within {cap} env steps" in out, out


def test_zoo_hyperparameters_map_onto_valid_configs_of_ours():
    from algorithms import DQN, SAC, TD3

    bench = _module()
    dqn = bench.ours_dqn_config(bench.DQN_ZOO, 100_000)
    # SB3: epsilon linear from 1.0 to 0.04 over 0.16 of total_timesteps
    assert dqn["epsilon"] == [[0, 1.0], [16_000, 0.04]]
    assert (dqn["lr"], dqn["train_batch_size"], dqn["train_freq"], dqn["gradient_steps"]) == (2.3e-3, 64, 256, 128)
    assert (dqn["double_q"], dqn["dueling"], dqn["max_grad_norm"], dqn["hidden_sizes"]) == (False, False, 10.0,
                                                                                             [256, 256])
    resolved = DQN.resolve_config(dqn)  # raises on a key or value ours does not take
    assert resolved["num_steps_sampled_before_learning_starts"] == 1000
    sac = bench.ours_sac_config(bench.SAC_ZOO, 20_000)
    assert (sac["lr"], sac["metrics_num_episodes_for_smoothing"], sac["train_batch_size"]) == (1e-3, 10, 256)
    resolved = SAC.resolve_config(sac)
    assert resolved["replay_buffer_config"] == {"capacity": 1_000_000}
    td3 = bench.ours_td3_config(bench.TD3_ZOO, 20_000)
    resolved = TD3.resolve_config(td3)
    assert (resolved["exploration_config"], resolved["policy_delay"], resolved["hidden_sizes"]) == (
        {"type": "GaussianNoise", "stddev": 0.1}, 2, [400, 300])
    assert (resolved["num_steps_sampled_before_learning_starts"], resolved["gamma"]) == (10_000, 0.98)


def test_dqn_defaults_mode_runs_ours_with_its_own_defaults():
    from algorithms import DQN
    from algorithms.dqn.trainer import DQN_DEFAULTS

    bench = _module()
    config = bench.ours_dqn_defaults_config(bench.DQN_ZOO, 100_000)
    resolved = DQN.resolve_config(config)
    # only the env, the layout and when the rule is checked are set: every learning key is the default
    assert set(config) == {"env", "num_workers", "num_envs_per_worker", "metrics_num_episodes_for_smoothing",
                           "min_sample_timesteps_per_iteration"}
    assert config["min_sample_timesteps_per_iteration"] == bench.DQN_ZOO["train_freq"]
    assert {k: resolved[k] for k in DQN_DEFAULTS if k not in config} == {
        k: v for k, v in DQN_DEFAULTS.items() if k not in config}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-sb3", "--algos", "dqn", "--dqn-ours",
                           "defaults"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "with DQN's defaults (--dqn-ours defaults, the rule checked every 256 env steps)" in proc.stdout
    assert re.search(r"^  ours seed 0: not within 2,048 env steps, .* \(2,048 env steps, torch threads 1; ",
                     proc.stdout, re.M), proc.stdout


def test_off_policy_benchmark_rejects_bad_flags():
    for args, message in ((["--algos", "dqn,ppo"], "--algos: unknown ['ppo'] (allowed: dqn, sac, td3)"),
                          (["--threads", "0"], "--threads: must be >= 1, got 0"),
                          (["--seeds", "a"], "--seeds: comma-separated ints, got 'a'"),
                          (["--dqn-schedule-steps", "0"], "--dqn-schedule-steps: must be >= 1, got 0")):
        proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr, proc.stderr
