"""Population Based Training: explore rules, exploit/checkpoint protocol, synch mode, and that it helps."""

from __future__ import annotations

import math
import statistics

import pytest

from schedulers import PAUSED, PENDING, RUNNING, FIFOScheduler, PopulationBasedTraining, TrialScheduler
from schedulers.simulator import simulate
from tests.schedulers.scheduler_curves import FakeDomain


class FakeCategorical:
    def __init__(self, categories):
        self.categories = list(categories)
        self.lower = self.upper = None

    def sample(self, rng, spec=None):
        return self.categories[int(rng.integers(len(self.categories)))]


def pbt(**kwargs) -> PopulationBasedTraining:
    kwargs.setdefault("time_attr", "training_iteration")
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    kwargs.setdefault("perturbation_interval", 5)
    kwargs.setdefault("seed", 0)
    return PopulationBasedTraining(**kwargs)


def explored(scheduler: PopulationBasedTraining, config: dict, n: int = 200) -> list[dict]:
    return [scheduler.explore(config) for _ in range(n)]


def test_list_values_move_to_a_neighbour():
    s = pbt(hyperparam_mutations={"w": [8, 16, 32, 64]}, resample_probability=0)
    assert {c["w"] for c in explored(s, {"w": 16})} == {8, 32}
    assert {c["w"] for c in explored(s, {"w": 8})} == {8, 16}  # clipped at the ends
    assert {c["w"] for c in explored(s, {"w": 64})} == {32, 64}
    assert {c["w"] for c in explored(s, {"w": 20})} <= {8, 16, 32, 64}  # not in the list: resampled


def test_continuous_values_are_multiplied_by_a_factor():
    s = pbt(hyperparam_mutations={"lr": lambda: 0.5, "batch": lambda: 64, "flag": lambda: True}, resample_probability=0)
    values = explored(s, {"lr": 0.1, "batch": 100, "flag": True, "other": "kept"})
    assert {round(c["lr"], 10) for c in values} == {0.12, 0.08}
    assert {c["batch"] for c in values} == {120, 80} and all(type(c["batch"]) is int for c in values)
    assert all(c["flag"] is True for c in values) and all(c["other"] == "kept" for c in values)
    s = pbt(hyperparam_mutations={"lr": FakeDomain(0.01, 0.5)}, resample_probability=0, perturbation_factors=(3.0, 0.01))
    assert {c["lr"] for c in explored(s, {"lr": 0.4})} == {0.5, 0.01}  # clipped to the domain's bounds


def test_resampling_draws_from_the_domain_list_or_callable():
    s = pbt(hyperparam_mutations={"lr": FakeDomain(0.01, 0.5), "w": [8, 16], "m": lambda: 0.7}, resample_probability=1)
    values = explored(s, {"lr": 5.0, "w": 16, "m": 0.0})
    assert all(0.01 <= c["lr"] < 0.5 for c in values) and len({c["lr"] for c in values}) > 100
    assert {c["w"] for c in values} == {8, 16}
    assert {c["m"] for c in values} == {0.7}


def test_categorical_domain_of_names_moves_like_a_list_nested_dicts_and_custom_fn():
    def custom(config):
        config["seen"] = config["opt"]["name"]
        return config

    s = pbt(
        hyperparam_mutations={"opt": {"name": FakeCategorical(["sgd", "adam", "rmsprop"]), "lr": [1, 2, 3]}},
        custom_explore_fn=custom,
        resample_probability=0,
    )
    values = explored(s, {"opt": {"name": "sgd", "lr": 2, "eps": 1e-8}})
    assert {c["opt"]["name"] for c in values} == {"sgd", "adam"}
    assert {c["opt"]["lr"] for c in values} == {1, 3}
    assert all(c["opt"]["eps"] == 1e-8 and c["seen"] == c["opt"]["name"] for c in values)


def test_explore_is_seeded():
    def draws(seed):
        s = pbt(hyperparam_mutations={"lr": FakeDomain(0.01, 0.5), "w": [8, 16, 32]}, seed=seed)
        return explored(s, {"lr": 0.1, "w": 16}, n=20)

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)


# -- the exploit protocol, on a hand-driven controller --------------------------------------------------


class Trial:
    def __init__(self, trial_id, config):
        self.trial_id, self.config = trial_id, dict(config)
        self.status, self.last_result, self.checkpoint_path = RUNNING, None, None


class Controller:
    def __init__(self, trials):
        self.trials, self.calls = trials, []

    def get_trials(self):
        return list(self.trials)

    def stop_trial(self, trial):
        self.calls.append(("stop", trial.trial_id))

    def checkpoint_trial(self, trial):
        self.calls.append(("checkpoint", trial.trial_id))
        trial.checkpoint_path = f"{trial.trial_id}/ckpt"

    def exploit_trial(self, trial, donor, new_config):
        self.calls.append(("exploit", trial.trial_id, donor.trial_id, new_config))


def report(s, controller, trial, t, score):
    trial.last_result = {"training_iteration": t, "score": score}
    return s.on_trial_result(controller, trial, dict(trial.last_result))


def test_bottom_quantile_exploits_a_checkpointed_top_trial():
    trials = [Trial(f"t{i}", {"lr": 0.1 * (i + 1)}) for i in range(4)]
    c = Controller(trials)
    s = pbt(hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]}, resample_probability=0)
    for t in trials:
        s.on_trial_add(c, t)
    # Interval 5: at t=3 nothing happens; at t=5 each trial is ranked against those ranked so far.
    assert report(s, c, trials[0], 3, 0.0) == TrialScheduler.CONTINUE and c.calls == []
    for i, t in enumerate(trials):
        assert report(s, c, t, 5, float(i)) == TrialScheduler.CONTINUE  # nobody waits
    # t1: 2 ranked, t1 top -> checkpoint; t2: t2 top; t3: top. t0 was alone when ranked: no checkpoint.
    assert c.calls == [("checkpoint", "t1"), ("checkpoint", "t2"), ("checkpoint", "t3")]
    c.calls.clear()
    # t0 at t=10, still worst: the top quantile (1 of 4) is t3, checkpointed at its last perturbation.
    assert report(s, c, trials[0], 10, 0.5) == TrialScheduler.CONTINUE
    assert c.calls == [("exploit", "t0", "t3", {"lr": 0.3})] or c.calls == [("exploit", "t0", "t3", {"lr": 0.4})]
    log = s.exploit_log()
    assert len(log) == 1 and log[0]["trial_id"] == "t0" and log[0]["donor_id"] == "t3"
    assert log[0]["donor_config"] == {"lr": 0.4} and log[0]["old_config"] == {"lr": 0.1}
    assert log[0]["time"] == 10 and log[0]["donor_time"] == 5
    assert s.state_dict()["exploits"] == log


def test_a_top_trial_without_a_checkpoint_is_no_donor():
    trials = [Trial(f"t{i}", {"lr": 0.1}) for i in range(4)]
    c = Controller(trials)
    s = pbt(hyperparam_mutations={"lr": [0.1, 0.2]})
    for t in trials:
        s.on_trial_add(c, t)
    report(s, c, trials[3], 5, 10.0)  # ranked alone: not checkpointed
    report(s, c, trials[1], 5, 1.0)
    report(s, c, trials[2], 5, 2.0)
    report(s, c, trials[0], 5, 0.0)  # bottom; the top is t3, which has no checkpoint
    assert not [call for call in c.calls if call[0] == "exploit"]


def test_an_exploit_the_controller_skips_is_not_recorded_and_is_tried_again():
    """A donor that ended without a checkpoint: the controller skips the exploit (False), the
    sweep goes on, and the trial is not counted as perturbed, so its next interval tries again."""
    trials = [Trial(f"t{i}", {"lr": 0.1 * (i + 1)}) for i in range(4)]
    c = Controller(trials)
    c.exploit_trial = lambda trial, donor, new_config: c.calls.append(("skipped", trial.trial_id)) or False
    s = pbt(hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]}, resample_probability=0)
    for t in trials:
        s.on_trial_add(c, t)
    for i, t in enumerate(trials):
        report(s, c, t, 5, float(i))
    assert report(s, c, trials[0], 10, 0.5) == TrialScheduler.CONTINUE
    assert ("skipped", "t0") in c.calls and s.exploit_log() == [] and trials[0].config == {"lr": 0.1}
    c.calls.clear()
    assert report(s, c, trials[0], 15, 0.6) == TrialScheduler.CONTINUE
    assert ("skipped", "t0") in c.calls  # tried again at its next interval


@pytest.mark.parametrize("keeps", [False, True], ids=["donors-clock", "own-clock"])
def test_the_interval_after_an_exploit_counts_from_the_clock_the_trial_goes_on_with(keeps):
    """Ray Tune's trial takes over the donor's iteration count; ours keeps its own
    (``exploit_keeps``). Either way the next perturbation comes as many iterations after the
    exploit as the donor's would have: here the donor perturbed at 5 and the trial is exploited
    at its own 10, so with its own clock the next is at 15, not at once."""
    trials = [Trial(f"t{i}", {"lr": 0.1 * (i + 1)}) for i in range(4)]
    c = Controller(trials)
    if keeps:
        c.exploit_keeps = ("training_iteration", "time_total_s")
    s = pbt(hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]}, resample_probability=0)
    for t in trials:
        s.on_trial_add(c, t)
    for i, t in enumerate(trials):
        report(s, c, t, 5, float(i))
    report(s, c, trials[0], 10, 0.5)
    assert [call[:3] for call in c.calls if call[0] == "exploit"] == [("exploit", "t0", "t3")]
    c.calls.clear()
    if keeps:  # the trial reports 11, 12, ... of its own count: 5 more iterations to the next point
        for t in range(11, 15):
            report(s, c, trials[0], t, 100.0)
        assert c.calls == []
        report(s, c, trials[0], 15, 100.0)
    else:  # as Ray Tune's controller reports it: the donor's count, 6, 7, ...
        for t in range(6, 10):
            report(s, c, trials[0], t, 100.0)
        assert c.calls == []
        report(s, c, trials[0], 10, 100.0)
    assert c.calls == [("checkpoint", "t0")]  # a perturbation point: now the top trial


def test_async_pauses_when_others_wait():
    trials = [Trial(f"t{i}", {"lr": 0.1}) for i in range(3)]
    trials[2].status = PENDING
    c = Controller(trials)
    s = pbt(hyperparam_mutations={"lr": [0.1, 0.2]})
    for t in trials:
        s.on_trial_add(c, t)
    assert report(s, c, trials[0], 4, 1.0) == TrialScheduler.CONTINUE  # not a perturbation point
    assert report(s, c, trials[0], 5, 1.0) == TrialScheduler.PAUSE  # t2 waits for a slot
    trials[0].status = PAUSED
    assert s.choose_trial_to_run(c) is trials[2]  # the one furthest behind


def test_synch_waits_for_the_whole_population():
    trials = [Trial(f"t{i}", {"lr": 0.1}) for i in range(4)]
    c = Controller(trials)
    s = pbt(hyperparam_mutations={"lr": [0.1, 0.2]}, synch=True, quantile_fraction=0.5)
    for t in trials:
        s.on_trial_add(c, t)
    for i, t in enumerate(trials[:3]):
        assert report(s, c, t, 5, float(i)) == TrialScheduler.PAUSE
        t.status = PAUSED
    assert c.calls == []  # nobody is ranked before everyone got there
    assert s.choose_trial_to_run(c) is None  # t3 is running; the others wait
    assert report(s, c, trials[3], 5, 3.0) == TrialScheduler.PAUSE
    kinds = [call[:3] if call[0] == "exploit" else call for call in c.calls]
    # Top half (t3, t2) checkpointed first (t2 is paused: its pause checkpoint serves), then the
    # bottom half exploits them.
    assert kinds[0] == ("checkpoint", "t3")
    assert sorted(k[1] for k in kinds if k[0] == "exploit") == ["t0", "t1"]
    assert {k[2] for k in kinds if k[0] == "exploit"} <= {"t2", "t3"}
    trials[3].status = PAUSED
    assert s.choose_trial_to_run(c) is not None


def test_synch_goes_on_when_a_lagging_trial_ends_early():
    # One slot: after the sync at t=5, t3 (the last to get there) runs last, and ends at t=7
    # while the others wait at t=10. Nobody reports at t=10 after that: the sync happens when
    # the scheduler is next asked for a trial to run.
    curves = {f"t{i}": [float(i) * k for k in range(1, 21)] for i in range(4)}
    curves["t3"] = curves["t3"][:7]
    configs = {tid: {"x": 1} for tid in curves}
    s = pbt(hyperparam_mutations={"x": [1, 2]}, synch=True, quantile_fraction=0)  # no exploits
    res = simulate(s, curves, configs, n_slots=1, metric="score", mode="max")
    assert res.max_time() == {"t0": 20, "t1": 20, "t2": 20, "t3": 7}
    assert [e.trial_id for e in res.events if e.kind == "complete"][0] == "t3"


# -- it helps -----------------------------------------------------------------------------------------------


def quality(config, t):
    """The metric grows at a rate set by lr; lr = 0.3 is best."""
    return t * (1.0 - abs(math.log(config["lr"] / 0.3)))


@pytest.mark.parametrize("synch", [False, True])
def test_the_population_moves_to_good_configs(synch):
    lrs = [0.01, 0.02, 0.05, 0.1, 0.3, 0.8, 2.0, 5.0]
    configs = [{"lr": lr} for lr in lrs]
    s = pbt(hyperparam_mutations={"lr": lrs}, perturbation_interval=4, quantile_fraction=0.25, synch=synch, seed=1)
    with_pbt = simulate(s, quality, configs, n_slots=4, metric="score", mode="max", max_iterations=40)
    without = simulate(FIFOScheduler(), quality, configs, n_slots=4, metric="score", mode="max", max_iterations=40)
    final = lambda res: [t.last_result["score"] for t in res.trials.values()]  # noqa: E731
    assert len(with_pbt.exploits) >= 5
    assert statistics.mean(final(with_pbt)) > statistics.mean(final(without)) + 5
    assert max(final(with_pbt)) == pytest.approx(max(final(without)))  # the best stays the best
    explored_lrs = {cfg["lr"] for _, (_, cfg) in ((e.trial_id, e.detail) for e in with_pbt.exploits)}
    assert explored_lrs <= set(lrs)


def test_an_exploit_goes_on_from_the_donors_carried_metric():
    """With curves that carry their metric (simulate(..., carry=True)), an exploiter continues
    from the donor's checkpointed metric, under its new config."""
    s = pbt(hyperparam_mutations={"rate": [1.0, 3.0]}, perturbation_interval=2, quantile_fraction=0.5,
            resample_probability=0, custom_explore_fn=lambda config: {**config, "rate": 2.0})
    res = simulate(s, lambda config, t, previous: (previous or 0.0) + config["rate"],
                   [{"rate": 1.0}, {"rate": 3.0}], n_slots=2, metric="score", mode="max", max_iterations=6, carry=True)
    exploits = [e for e in s.exploit_log() if e["trial_id"] == "trial_00000"]
    assert exploits and all(e["new_config"] == {"rate": 2.0} for e in exploits)
    donor_time = exploits[-1]["donor_time"]  # the exploiter restores the donor's metric there: 3 per step
    assert 0 < donor_time < 6
    assert res.trials["trial_00000"].last_result["score"] == 3.0 * donor_time + 2.0 * (6 - donor_time)
