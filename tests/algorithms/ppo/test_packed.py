"""Packed PPO trials (``pack_trials``) end to end: each member is a trial of its own for the store,
the schedulers and the searchers. ASHA, HyperBand and median stopping stop members and their
pack goes on; PBT and PB2 exploit inside a pack; a driver killed after an exploit resumes every member from its own checkpoint, each
iteration stored once (on SQLite and PostgreSQL); a member that diverges fails alone; a user's
module that stacks packs, one that does not runs unpacked and the sweep says why once; a member's
checkpoint is a PPO agent's."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from algorithms import load_agent
from schedulers import PB2, ASHAScheduler, HyperBandScheduler, MedianStoppingRule
from tests.algorithms.packed_trials import KillPackOnce, iterations_once_each
from tests.algorithms.ppo.member_models import branching_model, norm_model
from tests.algorithms.ppo.packed_sweeps import NAME, PBT_ITERATIONS, SMALL, exploits_on_record, pbt_sweep
from tests.conftest import ROOT
from tuner import tune
from tuner.search import BasicVariantGenerator, OptunaSearch, Repeater

# Best first: members of a pack report a rung about together, in the order they were made, and
# ASHA cuts a trial only if it is worse than the rung's results so far (ascending, none would be).
LRS = [5e-3, 3e-3, 2e-3, 1e-3, 5e-4, 3e-4, 2e-4, 1e-4]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_asha_stops_members_and_their_pack_goes_on(backend, ray_session, tmp_path, capsys, request):
    # The metric is the member's own lr (cur_lr), so which members a rung cuts depends on their
    # configs only: the engine's side of a cut is what is tested, not PPO's learning.
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    analysis = tune.run("PPO", config={**SMALL, "seed": 0, "lr": tune.grid_search(LRS)},
                        scheduler=ASHAScheduler(time_attr="training_iteration", max_t=8, grace_period=2,
                                                reduction_factor=2),
                        metric="cur_lr", mode="max", stop={"training_iteration": 8}, checkpoint_at_end=True,
                        storage_path=str(tmp_path), database_url=url, name="packed_asha", verbose=1, pack_trials=8)
    said = capsys.readouterr().out
    assert said.count("pack_trials=8: trials of PPO run packed, up to 8 to a process") == 1
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * len(LRS)
    iterations_once_each(analysis)
    last = {t.config["lr"]: t.last_result for t in analysis.trials}
    assert all(r["learner"] == "packed" for r in last.values())
    assert last[max(LRS)]["training_iteration"] == 8  # the best ran its budget
    assert min(r["training_iteration"] for r in last.values()) < 8  # a rung cut members...
    assert last[max(LRS)]["pack_size"] < len(LRS)  # ...and their pack went on without them
    for trial in analysis.trials:  # one TensorBoard run per member
        assert (tmp_path / "packed_asha" / "tensorboard" / f"PPO_{trial.trial_id}").is_dir()
    # a member's checkpoint is a PPO agent's: it loads and acts
    best = analysis.get_best_checkpoint(analysis.get_best_trial())
    agent = load_agent(best.path)
    assert agent.env_steps_total == last[max(LRS)]["env_steps_total"]
    assert agent.act(np.zeros(4, dtype=np.float32)) in (0, 1)


@pytest.mark.parametrize("scheduler", ["hyperband", "median", "pb2"])
def test_hyperband_median_stopping_and_pb2_drive_members_of_a_pack(scheduler, ray_session, tmp_path):
    """The other schedulers of item 2: HyperBand (it pauses members at a rung and stops the
    losers) and median stopping cut members and the pack goes on; PB2 exploits inside the pack,
    each member learning on with the lr it was given."""
    made = {"hyperband": lambda: HyperBandScheduler(time_attr="training_iteration", max_t=9, reduction_factor=3),
            "median": lambda: MedianStoppingRule(time_attr="training_iteration", grace_period=2,
                                                 min_samples_required=3),
            "pb2": lambda: PB2(time_attr="training_iteration", perturbation_interval=2,
                               hyperparam_bounds={"lr": [1e-4, 5e-3]}, seed=0)}[scheduler]()
    analysis = tune.run("PPO", config={**SMALL, "seed": 0, "lr": tune.grid_search(LRS)}, scheduler=made,
                        metric="cur_lr", mode="max", stop={"training_iteration": 9}, storage_path=str(tmp_path),
                        name=f"packed_{scheduler}", verbose=0, pack_trials=len(LRS))
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * len(LRS)
    iterations_once_each(analysis)
    last = [t.last_result for t in analysis.trials]
    assert all(r["learner"] == "packed" for r in last) and len({r["pack_id"] for r in last}) == 1
    if scheduler == "pb2":
        assert analysis.exploits and all(r["training_iteration"] == 9 for r in last)
        for trial in analysis.trials:  # each learns on with the lr PB2 gave it, in the pack
            assert trial.last_result["cur_lr"] == pytest.approx(trial.config["lr"])
        assert {t.config["lr"] for t in analysis.trials} != set(LRS)
    else:
        if scheduler == "hyperband":  # the first members at a rung waited there, paused (a pause checkpoint)
            assert any(t.checkpoint_path for t in analysis.trials)
        assert last[0]["training_iteration"] == 9  # the best (lr 5e-3) ran its budget
        assert min(r["training_iteration"] for r in last) < 9 and last[0]["pack_size"] < len(LRS)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_packed_pbt_sweep_killed_after_an_exploit_resumes_every_member_once(backend, ray_session, tmp_path,
                                                                               request):
    """The PBT sweep's driver (it joins this session's Ray) is SIGKILLed once an exploit inside
    its pack is on record; resumed here, every member finishes from its own last checkpoint, each
    iteration's result stored once, those from before the kill unchanged."""
    import ray

    storage = str(tmp_path)
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    with open(tmp_path / "driver.stderr", "w") as err:  # a file: a full pipe would block the driver
        proc = subprocess.Popen([sys.executable, "-m", "tests.algorithms.ppo.packed_sweeps", storage,
                                 *([url] if url else [])], cwd=ROOT, env=env, stderr=err)
    store = url or f"sqlite:///{tmp_path / NAME / 'tuner.db'}"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None and exploits_on_record(store) < 1:
            time.sleep(0.05)
        assert proc.poll() is None and exploits_on_record(store), "no exploit: " + (tmp_path / "driver.stderr").read_text()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
    before = tune.load(tmp_path / NAME, database_url=url) if url else tune.load(tmp_path / NAME)
    rows_before = {(r["trial_id"], r["training_iteration"]): r["env_steps_total"]
                   for r in before.results_df.to_dict("records")}
    before.close()

    analysis = pbt_sweep(storage, url, resume=True)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    iterations_once_each(analysis)
    assert all(len(frame) == PBT_ITERATIONS for frame in analysis.trial_dataframes.values())
    after = {(r["trial_id"], r["training_iteration"]): r["env_steps_total"] for r in analysis.results_df.to_dict("records")}
    assert all(after[key] == value for key, value in rows_before.items())
    assert analysis.exploits, "no member exploited another"
    for trial in analysis.trials:  # each learns with its own (perturbed) lr, in a pack
        assert trial.last_result["cur_lr"] == pytest.approx(trial.config["lr"])
        assert trial.last_result["learner"] == "packed"


def test_optuna_and_asha_over_packed_members_each_trial_told_to_the_study_once(ray_session, tmp_path):
    import optuna

    searcher = OptunaSearch(seed=0)
    analysis = tune.run("PPO", config={**SMALL, "seed": 0, "lr": tune.loguniform(1e-4, 5e-3)}, search_alg=searcher,
                        scheduler=ASHAScheduler(time_attr="training_iteration", max_t=6, grace_period=2,
                                                reduction_factor=2),
                        num_samples=12, metric="episode_return_mean", mode="max", stop={"training_iteration": 6},
                        storage_path=str(tmp_path), name="packed_optuna", verbose=0, pack_trials=4)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 12
    iterations_once_each(analysis)
    last = [t.last_result for t in analysis.trials]
    assert all(r["learner"] == "packed" for r in last) and min(r["training_iteration"] for r in last) < 6
    states = [t.state for t in searcher.study.trials]
    assert len(states) == 12 and all(s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
                                     for s in states)


def test_tuners_tune_config_packs_as_tune_run_does(ray_session, tmp_path):
    tuner = tune.Tuner("PPO", param_space={**SMALL, "seed": 0, "lr": tune.grid_search([1e-3, 3e-3])},
                       tune_config=tune.TuneConfig(metric="episode_return_mean", mode="max", pack_trials=2),
                       run_config=tune.RunConfig(name="tuner_packed", storage_path=str(tmp_path),
                                                 stop={"training_iteration": 2}, verbose=0))
    grid = tuner.fit()
    last = [t.last_result for t in grid.analysis.trials]
    assert [r["learner"] for r in last] == ["packed"] * 2 and len({r["pack_id"] for r in last}) == 1
    assert [r["training_iteration"] for r in last] == [2, 2]


def test_repeaters_seeds_of_one_config_pack_together(ray_session, tmp_path):
    searcher = Repeater(BasicVariantGenerator(), repeat=3, set_index=False)  # seed None: each its own
    analysis = tune.run("PPO", config={**SMALL, "lr": tune.grid_search([1e-3, 3e-3])}, search_alg=searcher,
                        stop={"training_iteration": 2}, storage_path=str(tmp_path), name="seeds", verbose=0,
                        pack_trials=3)
    packs: dict[float, set[str]] = {}
    for trial in analysis.trials:
        packs.setdefault(trial.config["lr"], set()).add(trial.last_result["pack_id"])
    assert all(len(ids) == 1 for ids in packs.values()) and len(set.union(*packs.values())) == 2
    curves = {tuple(frame["policy_loss"]) for frame in analysis.trial_dataframes.values()}
    assert len(curves) == len(analysis.trials)  # six seeds, six different runs


def test_a_new_trial_takes_the_slot_a_finished_member_left(ray_session, tmp_path):
    analysis = tune.run("PPO", config={**SMALL, "seed": tune.grid_search([0, 1, 2, 3])}, max_concurrent_trials=2,
                        stop={"training_iteration": 2}, storage_path=str(tmp_path), name="slots", verbose=0,
                        pack_trials=2)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 4
    assert len({t.last_result["pack_id"] for t in analysis.trials}) == 1  # trials 2 and 3 in 0's and 1's slots


def test_a_killed_pack_restarts_every_member_from_its_own_checkpoint(ray_session, tmp_path):
    killer = KillPackOnce()
    analysis = tune.run("PPO", config={**SMALL, "seed": tune.grid_search([0, 1, 2])}, stop={"training_iteration": 4},
                        checkpoint_freq=1, max_failures=1, storage_path=str(tmp_path), name="killed", verbose=0,
                        pack_trials=3, callbacks=[killer])
    assert killer.killed is not None
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    iterations_once_each(analysis)
    assert all(t.num_failures == 1 and t.last_result["pack_id"] != killer.killed for t in analysis.trials)


def test_a_member_that_diverges_fails_alone(ray_session, tmp_path):
    analysis = tune.run("PPO", config={**SMALL, "seed": 0, "lr": tune.grid_search([1e-3, 1e30, 3e-3])},
                        stop={"training_iteration": 4}, storage_path=str(tmp_path), name="nan", verbose=0,
                        pack_trials=3, raise_on_failed_trial=False)
    by_lr = {t.config["lr"]: t for t in analysis.trials}
    assert by_lr[1e30].status == "ERROR" and "not finite" in by_lr[1e30].error
    for lr in (1e-3, 3e-3):
        assert by_lr[lr].status == "TERMINATED" and by_lr[lr].last_result["training_iteration"] == 4


def _crashes_for_seed_seven(config):
    """CartPole whose envs crash at their 5th step when reset from member seed 7's seeds."""
    import gymnasium as gym

    class Crashes(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            if seed is not None:
                self.bad = seed // 10_000 == 7
            self.steps = 0
            return self.env.reset(seed=seed, options=options)

        def step(self, action):
            self.steps += 1
            if getattr(self, "bad", False) and self.steps == 5:
                raise RuntimeError("the simulator crashed")
            return self.env.step(action)

    return Crashes(gym.make("CartPole-v1"))


def test_a_member_whose_env_raises_fails_alone(ray_session, tmp_path):
    analysis = tune.run("PPO", config={**SMALL, "env": _crashes_for_seed_seven, "seed": tune.grid_search([0, 7, 1])},
                        stop={"training_iteration": 3}, storage_path=str(tmp_path), name="crash", verbose=0,
                        pack_trials=3, raise_on_failed_trial=False)
    by_seed = {t.config["seed"]: t for t in analysis.trials}
    assert by_seed[7].status == "ERROR" and "the simulator crashed" in by_seed[7].error
    for seed in (0, 1):
        assert by_seed[seed].status == "TERMINATED" and by_seed[seed].last_result["training_iteration"] == 3


def test_a_user_model_that_stacks_runs_packed_and_its_checkpoint_is_its_agents(ray_session, tmp_path, capsys):
    own = {key: value for key, value in SMALL.items() if key != "hidden_sizes"}
    analysis = tune.run("PPO", config={**own, "model": norm_model, "model_config": {"width": 8},
                                       "seed": tune.grid_search([0, 1, 2])},
                        stop={"training_iteration": 2}, checkpoint_at_end=True, metric="episode_return_mean",
                        mode="max", storage_path=str(tmp_path), name="own", verbose=1, pack_trials=3)
    said = capsys.readouterr().out
    assert said.count("pack_trials=3: trials of PPO run packed, up to 3 to a process (PPO on 'CartPole-v1', 4 envs "
                      "and norm_model's module a member, stacked with torch.func a pack)") == 1, said
    assert [t.last_result["learner"] for t in analysis.trials] == ["packed"] * 3
    assert len({t.last_result["pack_id"] for t in analysis.trials}) == 1
    iterations_once_each(analysis)
    # (the factory travelled by value, as a script's own functions do: load_agent is given it)
    agents = [load_agent(analysis.get_best_checkpoint(t).path, config={"model": norm_model}) for t in analysis.trials]
    weights = [agent.policy.state_dict()["trunk.0.weight"] for agent in agents]
    assert not np.allclose(weights[0].numpy(), weights[1].numpy())  # each its own member's slice
    env = agents[0].make_env()
    obs, _ = env.reset(seed=0)
    assert env.action_space.contains(agents[0].act(obs))


def test_a_user_model_that_does_not_stack_runs_unpacked_and_the_sweep_says_why_once(ray_session, tmp_path, capsys):
    own = {key: value for key, value in SMALL.items() if key != "hidden_sizes"}
    analysis = tune.run("PPO", config={**own, "model": branching_model, "seed": tune.grid_search([0, 1, 2])},
                        stop={"training_iteration": 1}, storage_path=str(tmp_path), name="own", verbose=1)
    said = capsys.readouterr().out
    assert said.count("pack_trials='auto': trials of PPO run one per process: config key 'model' is branching_model: "
                      "its module does not stack under torch.func.vmap (RuntimeError: ") == 1, said
    assert all(t.last_result["learner"] == "torch" for t in analysis.trials)
    with pytest.raises(ValueError, match=r"^pack_trials=2: trials of PPO cannot be packed: config key 'model' is "
                                         r"branching_model: its module does not stack"):
        tune.run("PPO", config={**own, "model": branching_model}, pack_trials=2, storage_path=str(tmp_path),
                 name="forced", verbose=0)
    assert not (tmp_path / "forced").exists()


def test_auto_reads_a_searchers_own_space_and_leaves_a_define_by_run_one_unpacked(ray_session, tmp_path, capsys):
    from tuner.search import OptunaSearch

    base = {k: v for k, v in SMALL.items() if k != "num_envs_per_worker"}
    own = OptunaSearch(space={"num_envs_per_worker": tune.choice([2, 4]), "lr": tune.loguniform(1e-4, 1e-2)},
                       metric="episode_return_mean", mode="max", seed=0)
    tune.run("PPO", config=base, search_alg=own, num_samples=2, stop={"training_iteration": 1},
             storage_path=str(tmp_path), name="own_space", verbose=1)
    said = capsys.readouterr().out
    assert said.count("run one per process: the search varies num_envs_per_worker: keys that fix a pack's shape") == 1, said

    def space(trial):
        trial.suggest_float("lr", 1e-4, 1e-2, log=True)

    by_run = OptunaSearch(space=space, metric="episode_return_mean", mode="max", seed=0)
    analysis = tune.run("PPO", config=SMALL, search_alg=by_run, num_samples=2, stop={"training_iteration": 1},
                        storage_path=str(tmp_path), name="by_run", verbose=1)
    said = capsys.readouterr().out
    assert said.count("run one per process: the searcher suggests its space trial by trial") == 1, said
    assert all(t.last_result["learner"] != "packed" for t in analysis.trials)


def test_a_tuner_packs_with_its_tune_config(ray_session, tmp_path):
    tuner = tune.Tuner("PPO", param_space={**SMALL, "seed": tune.grid_search([0, 1])},
                       tune_config=tune.TuneConfig(pack_trials=2),
                       run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path), name="tuner",
                                                 verbose=0))
    results = tuner.fit()
    assert [r.metrics["learner"] for r in results] == ["packed", "packed"]
    assert len({r.metrics["pack_id"] for r in results}) == 1


@pytest.mark.parametrize("value", ["yes", 0, -1, 2.5, True, None])
def test_a_bad_pack_trials_is_one_error_and_nothing_is_stored(value, tmp_path):
    with pytest.raises(ValueError, match=r"^pack_trials must be 'auto', False or an int >= 1"):
        tune.run("PPO", config=SMALL, pack_trials=value, storage_path=str(tmp_path), name="bad", verbose=0)
    assert not (tmp_path / "bad").exists()


def test_packing_forced_on_a_trainer_that_cannot_pack_is_one_error(tmp_path):
    def train(config):
        tune.report({"x": 1})

    with pytest.raises(ValueError, match=r"^pack_trials=4: train does not pack trials"):
        tune.run(train, pack_trials=4, storage_path=str(tmp_path), name="bad", verbose=0)
    assert not (tmp_path / "bad").exists()


def test_packing_forced_on_a_config_that_cannot_pack_names_the_key(ray_session, tmp_path):
    with pytest.raises(ValueError, match=r"^pack_trials=4: trials of PPO cannot be packed: config key 'num_workers'"):
        tune.run("PPO", config={**SMALL, "num_workers": 1}, pack_trials=4, storage_path=str(tmp_path),
                 name="bad", verbose=0)
    assert not (tmp_path / "bad").exists()


def test_members_that_ask_a_gpu_share_a_pack_on_it_and_others_pack_apart():
    from algorithms import PPO

    on_cpu, how_cpu = PPO.pack_signature(dict(SMALL))
    on_gpu, how_gpu = PPO.pack_signature({**SMALL, "num_gpus_for_learner": 1})
    assert on_gpu is not None and on_gpu != on_cpu  # one device to a pack
    assert "MLP a member, stacked with torch.func on its GPU" in how_gpu and "one numpy learner" in how_cpu


def test_members_of_one_pack_may_differ_in_epochs(ray_session, tmp_path):
    analysis = tune.run("PPO", config={**SMALL, "seed": 0, "num_epochs": tune.grid_search([1, 3])},
                        stop={"training_iteration": 2}, storage_path=str(tmp_path), name="epochs", verbose=0,
                        pack_trials=2)
    last = [t.last_result for t in analysis.trials]
    assert [r["learner"] for r in last] == ["packed", "packed"] and len({r["pack_id"] for r in last}) == 1
    assert all(r["training_iteration"] == 2 and math.isfinite(r["policy_loss"]) for r in last)
