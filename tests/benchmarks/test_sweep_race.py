"""The race benchmark runs, on a tiny budget (its speed is checked by its own ``--guard``, not here),
and gives every system the same trials."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize(("search", "label"), [("shared", "tuner (ours)"), ("own", "tuner (ours, TPE)")])
def test_sweep_race_prints_the_table_and_the_profile_on_a_tiny_budget(tmp_path, search, label):
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # the session's Ray: no second engine start
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sweep_race.py"), "--systems", "tuner", "--trials", "2",
         "--max-steps", "3000", "--grace", "1000", "--storage", str(tmp_path), "--search", search],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"search: {search}" in out, out
    row = re.search(rf"^{re.escape(label)}\s+(\S+)\s+([\d.]+)\s+(\d+)/2\s+(\d+)", out, re.M)
    assert row, out
    assert int(row.group(4)) >= 2 * 1000  # both trials sampled at least to the grace period
    assert "where the wall time went" in out and "learning" in out and "sampling" in out
    share = re.search(r"parts add up to ([\d.]+)% of it", out)
    assert share and 90.0 <= float(share.group(1)) <= 110.0, out


def test_every_system_gets_the_same_trials_in_the_same_order():
    """The shared list, as each system's own machinery resolves its input: our searcher over our
    config, Ray Tune's variant generator over RLlib's space, the Optuna study's enqueued trials."""
    import optuna
    from ray import tune as ray_tune
    from ray.tune.search.variant_generator import generate_variants

    from benchmarks.peers import race_optuna_sb3, race_raytune_rllib
    from benchmarks.peers.race import KEYS, draw_trials
    from benchmarks.sweep_race import ours_config
    from tuner import tune
    from tuner.search import BasicVariantGenerator

    trials = draw_trials(6, seed=7)
    assert draw_trials(6, seed=7) == trials and draw_trials(6, seed=8) != trials
    assert len({t["seed"] for t in trials}) == 6 and all(set(t) == {*KEYS, "seed"} for t in trials)

    searcher = BasicVariantGenerator(random_state=0)
    searcher.set_search_properties(None, None, ours_config(trials, tune), num_samples=1)
    ours = [searcher.suggest(str(i)) for i in range(len(trials))]
    assert searcher.suggest("last") == "FINISHED"
    assert [{key: config[key] for key in trials[0]} for config in ours] == trials

    renamed = {rllib: key for key, rllib in race_raytune_rllib.RENAMED.items()}
    rllib = [{renamed.get(k, k): v for k, v in spec["config"].items()}
             for _, spec in generate_variants({"config": race_raytune_rllib.space(trials, ray_tune)})]
    assert rllib == trials
    # Ray Tune may also call a sample_from function with the config itself, not a spec holding it
    space = race_raytune_rllib.space(trials, ray_tune)
    assert [space["lr"].func({"seed": t["seed"]}) for t in trials] == [t["lr"] for t in trials]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    race_optuna_sb3.enqueue(study, trials)
    assert [race_optuna_sb3.trial_config(study.ask()) for _ in trials] == trials


def test_an_sb3_trial_stops_at_the_end_of_the_update_that_asked_it():
    """As ours ends a trial after the iteration whose result stops it: no step of a next rollout."""
    pytest.importorskip("stable_baselines3")
    import optuna

    from benchmarks.peers import race_optuna_sb3
    from benchmarks.peers.race import Budget, draw_trials

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # a pruner that prunes at the first report: the trial's first rollout
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.ThresholdPruner(lower=1e9))
    race_optuna_sb3.enqueue(study, [dict(draw_trials(1, seed=0)[0], train_batch_size=1024, num_epochs=4)])
    study.optimize(lambda trial: race_optuna_sb3._objective(trial, Budget(max_steps=8192), shared=True), n_trials=1)
    trial = study.trials[0]
    assert trial.state == optuna.trial.TrialState.PRUNED and trial.user_attrs["env_steps"] == 1024


def test_repeats_print_the_median_and_spread_of_every_column():
    from benchmarks.sweep_race import Outcome, median_outcomes, print_medians

    runs = [[Outcome("tuner (ours)", 10.0, 30.0, 6, 16, 600_000), Outcome("Optuna + SB3", None, 150.0, 5, 16, 700_000)],
            [Outcome("tuner (ours)", 14.0, 36.0, 7, 16, 640_000), Outcome("Optuna + SB3", 40.0, 180.0, 7, 16, 710_000)],
            [Outcome("tuner (ours)", 12.0, 33.0, 8, 16, 620_000), Outcome("Optuna + SB3", 30.0, 200.0, 6, 16, 705_000)]]
    out = io.StringIO()
    print_medians(runs, out=out)
    text = out.getvalue()
    assert "medians of 3 runs [min-max]" in text
    ours = next(line for line in text.splitlines() if line.startswith("tuner (ours)"))
    assert ours.split()[2:] == ["12.0", "[10.0-14.0]", "33.0", "[30.0-36.0]", "7", "[6-8]", "620000",
                                "[600000-640000]", "1.00", "[1.00-1.00]", "1.00", "[1.00-1.00]"], ours
    peer = median_outcomes(runs)[1]
    assert (peer.first_solve_s, peer.sweep_s, peer.solved, peer.env_steps) == (40.0, 180.0, 6, 705_000)


def test_sweep_race_rejects_an_unknown_system():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_race.py"), "--systems", "tuner,foo"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert "--systems: unknown ['foo'] (allowed: tuner, optuna, rllib)" in proc.stderr


def test_guard_holds_ours_to_the_fastest_peer():
    """The bar is the best (fastest) peer's: a slower peer's larger solved count does not set it."""
    from benchmarks.sweep_race import Outcome, guard

    ours = Outcome("tuner", first_solve_s=15.0, sweep_s=36.9, solved=7, trials=16, env_steps=670_170)
    optuna = Outcome("Optuna + SB3", first_solve_s=37.2, sweep_s=184.2, solved=5, trials=16, env_steps=705_664)
    rllib = Outcome("Ray Tune + RLlib", first_solve_s=61.9, sweep_s=675.8, solved=9, trials=16, env_steps=461_824)
    assert guard([ours, optuna, rllib]) == []
    slow = Outcome("tuner", first_solve_s=30.0, sweep_s=70.0, solved=4, trials=16, env_steps=1)
    assert guard([slow, optuna, rllib]) == [
        "sweep 70.0 s > a third of Optuna + SB3's 184.2 s",
        "first solve 30.0 s > two thirds of Optuna + SB3's 37.2 s",
        "solved 4 < Optuna + SB3's 5",
    ]
    assert guard([ours]) == ["no peer ran: nothing to compare against"]
