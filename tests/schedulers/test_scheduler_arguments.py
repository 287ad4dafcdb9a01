"""Bad scheduler arguments and bad results: one clear ValueError that names the culprit."""

from __future__ import annotations

import pytest

from schedulers import (
    ASHAScheduler,
    HyperBandScheduler,
    PB2,
    MedianStoppingRule,
    PopulationBasedTraining,
)

MUTATIONS = {"lr": [0.1, 0.2]}
BOUNDS = {"lr": [1e-4, 1e-2]}


def raises_one(fn, *names: str) -> str:
    """``fn()`` raises a ValueError, not chained to another error, naming every one of ``names``."""
    with pytest.raises(ValueError) as info:
        fn()
    exc = info.value
    assert exc.__cause__ is None and exc.__context__ is None, "one error, not a chain"
    message = str(exc)
    assert "\n" not in message
    for name in names:
        assert name in message, f"{name!r} not in {message!r}"
    return message


@pytest.mark.parametrize(
    "make,field",
    [
        (lambda: ASHAScheduler(reduction_factor=1), "reduction_factor"),
        (lambda: ASHAScheduler(reduction_factor=0.5), "reduction_factor"),
        (lambda: ASHAScheduler(reduction_factor="3"), "reduction_factor"),
        (lambda: ASHAScheduler(max_t=10, grace_period=20), "grace_period"),
        (lambda: ASHAScheduler(grace_period=0), "grace_period"),
        (lambda: ASHAScheduler(max_t=0), "max_t"),
        (lambda: ASHAScheduler(brackets=0), "brackets"),
        (lambda: ASHAScheduler(brackets=1.5), "brackets"),
        (lambda: ASHAScheduler(stop_last_trials="yes"), "stop_last_trials"),
        (lambda: ASHAScheduler(mode="maximize"), "mode"),
        (lambda: ASHAScheduler(time_attr=""), "time_attr"),
        (lambda: ASHAScheduler(promotion=1), "promotion"),
        (lambda: ASHAScheduler(seed="x"), "seed"),
        (lambda: HyperBandScheduler(reduction_factor=1), "reduction_factor"),
        (lambda: HyperBandScheduler(max_t=-1), "max_t"),
        (lambda: HyperBandScheduler(mode="best"), "mode"),
        (lambda: HyperBandScheduler(stop_last_trials=None), "stop_last_trials"),
        (lambda: MedianStoppingRule(grace_period=-1), "grace_period"),
        (lambda: MedianStoppingRule(min_samples_required=0), "min_samples_required"),
        (lambda: MedianStoppingRule(min_samples_required=2.5), "min_samples_required"),
        (lambda: MedianStoppingRule(min_time_slice=-1), "min_time_slice"),
        (lambda: MedianStoppingRule(hard_stop="no"), "hard_stop"),
        (lambda: MedianStoppingRule(mode="MIN"), "mode"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, perturbation_interval=0), "perturbation_interval"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, burn_in_period=-1), "burn_in_period"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, quantile_fraction=0.6), "quantile_fraction"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, resample_probability=1.5), "resample_probability"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, perturbation_factors=()), "perturbation_factors"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, perturbation_factors=(1.2, -1)), "perturbation_factors"),
        (lambda: PopulationBasedTraining(hyperparam_mutations={"lr": 5}), "hyperparam_mutations['lr']"),
        (lambda: PopulationBasedTraining(hyperparam_mutations={"opt": {"lr": []}}), "hyperparam_mutations['opt']['lr']"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=[("lr", [1])]), "hyperparam_mutations"),
        (lambda: PopulationBasedTraining(), "hyperparam_mutations or custom_explore_fn"),
        (lambda: PopulationBasedTraining(custom_explore_fn="f"), "custom_explore_fn"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, mode="up"), "mode"),
        (lambda: PopulationBasedTraining(hyperparam_mutations=MUTATIONS, synch="yes"), "synch"),
        (lambda: PB2(), "hyperparam_bounds"),
        (lambda: PB2(hyperparam_bounds={}), "hyperparam_bounds"),
        (lambda: PB2(hyperparam_bounds=[("lr", [0, 1])]), "hyperparam_bounds"),
        (lambda: PB2(hyperparam_bounds={"lr": [0.1]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": [0.1, 0.2, 0.3]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": [0.2, 0.1]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": [0.1, 0.1]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": [0, float("inf")]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": ["0", "1"]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": [False, True]}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": "0.1-0.2"}), "hyperparam_bounds['lr']"),
        (lambda: PB2(hyperparam_bounds={"lr": [1e-4, 1e-2], "opt": {}}), "hyperparam_bounds['opt']"),
        (lambda: PB2(hyperparam_bounds={"opt": {"eps": [1, 0]}}), "hyperparam_bounds['opt']['eps']"),
        (lambda: PB2(hyperparam_bounds={1: [0, 1]}), "hyperparam_bounds key"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, quantile_fraction=0.6), "quantile_fraction"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, quantile_fraction=-0.1), "quantile_fraction"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, perturbation_interval=0), "perturbation_interval"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, perturbation_interval="60"), "perturbation_interval"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, custom_explore_fn="f"), "custom_explore_fn"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, log_config=1), "log_config"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, require_attrs="no"), "require_attrs"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, synch="yes"), "synch"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, seed=1.5), "seed"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, mode="up"), "mode"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, metric=""), "metric"),
        (lambda: PB2(hyperparam_bounds=BOUNDS, time_attr=""), "time_attr"),
    ],
)
def test_bad_argument(make, field):
    message = raises_one(make, field)
    assert message.split(":")[0] in {"ASHAScheduler", "HyperBandScheduler", "MedianStoppingRule", "PopulationBasedTraining",
                                     "PB2"}


def test_message_reads_well():
    assert raises_one(lambda: ASHAScheduler(reduction_factor=1)) == "ASHAScheduler: reduction_factor must be > 1, got 1"
    assert raises_one(lambda: ASHAScheduler(max_t=10, grace_period=20)) == (
        "ASHAScheduler: grace_period must be <= max_t (10), got 20"
    )
    assert raises_one(lambda: HyperBandScheduler(mode="best")) == "HyperBandScheduler: mode must be 'min' or 'max', got 'best'"
    assert raises_one(lambda: PB2(hyperparam_bounds={"lr": [0.2, 0.1]})) == (
        "PB2: hyperparam_bounds['lr'] must be [low, high] with finite numbers low < high, got [0.2, 0.1]"
    )


def test_good_edge_values_are_accepted_and_take_effect():
    # a grace period equal to max_t: no rung below it, and max_t stops the trial there
    asha = ASHAScheduler(metric="r", mode="max", max_t=5, grace_period=5, reduction_factor=1.5)
    trial = Trial()
    c = Controller(trial)
    asha.on_trial_add(c, trial)
    assert [asha.on_trial_result(c, trial, {"training_iteration": t, "r": 0.0}) for t in (1, 4)] == [asha.CONTINUE] * 2
    assert asha.on_trial_result(c, trial, {"training_iteration": 5, "r": 0.0}) == asha.STOP

    # no grace period: a trial below the median is stopped at its first result; with an endless
    # time slice the rule never pauses
    median = MedianStoppingRule(metric="r", mode="max", time_attr="training_iteration", grace_period=0,
                                min_time_slice=float("inf"))
    assert median.never_pauses
    trials = [Trial(f"t{i}") for i in range(4)]
    c = Controller(*trials)
    for t in trials:
        median.on_trial_add(c, t)
    for t in trials[:3]:
        assert median.on_trial_result(c, t, {"training_iteration": 1, "r": 1.0}) == median.CONTINUE
    assert median.on_trial_result(c, trials[3], {"training_iteration": 1, "r": 0.0}) == median.STOP

    # quantile 0.5 of 2 trials: the worse exploits the better, with the config the user's explore
    # function returns
    explored = []
    pbt = PopulationBasedTraining(metric="r", mode="max", time_attr="training_iteration", perturbation_interval=1,
                                  hyperparam_mutations=MUTATIONS,
                                  quantile_fraction=0.5, resample_probability=0,
                                  custom_explore_fn=lambda config: explored.append(dict(config)) or {**config, "lr": 0.15})
    good, bad = Trial("good", {"lr": 0.1}), Trial("bad", {"lr": 0.2})
    c = RecordingController(good, bad)
    for t in (good, bad):
        pbt.on_trial_add(c, t)
    for t in (1, 2):  # the better one is checkpointed at a perturbation before it can be a donor
        pbt.on_trial_result(c, good, {"training_iteration": t, "r": 1.0})
        pbt.on_trial_result(c, bad, {"training_iteration": t, "r": 0.0})
    assert [(t.trial_id, d.trial_id, cfg["lr"]) for t, d, cfg in c.exploits] == [("bad", "good", 0.15)]
    # the explore function sees the donor's config after PBT's own perturbation (a neighbour in the list)
    assert len(explored) == 1 and explored[0]["lr"] in MUTATIONS["lr"]


class Trial:
    def __init__(self, trial_id="t0", config=None):
        self.trial_id, self.config = trial_id, config if config is not None else {"lr": 0.1}
        self.status, self.last_result, self.checkpoint_path = "RUNNING", None, None


class Controller:
    def __init__(self, *trials):
        self.trials = list(trials)

    def get_trials(self):
        return list(self.trials)

    def stop_trial(self, trial):
        pass

    def checkpoint_trial(self, trial):
        trial.checkpoint_path = "x"

    def exploit_trial(self, trial, donor, new_config):
        pass


class RecordingController(Controller):
    def __init__(self, *trials):
        super().__init__(*trials)
        self.exploits = []

    def exploit_trial(self, trial, donor, new_config):
        self.exploits.append((trial, donor, new_config))


ALL = {
    "asha": lambda **kw: ASHAScheduler(**kw),
    "asha_promotion": lambda **kw: ASHAScheduler(promotion=True, **kw),
    "hyperband": lambda **kw: HyperBandScheduler(**kw),
    "median": lambda **kw: MedianStoppingRule(time_attr="training_iteration", grace_period=0, **kw),
    "pbt": lambda **kw: PopulationBasedTraining(time_attr="training_iteration", hyperparam_mutations=MUTATIONS, **kw),
    "pb2": lambda **kw: PB2(time_attr="training_iteration", hyperparam_bounds={"lr": [0.01, 1.0]}, **kw),
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_metric_missing_from_a_result(name):
    s = ALL[name](metric="loss", mode="min")
    trial = Trial()
    c = Controller(trial)
    s.on_trial_add(c, trial)
    raises_one(lambda: s.on_trial_result(c, trial, {"training_iteration": 1, "accuracy": 0.5}), "'loss'", "accuracy")
    raises_one(lambda: s.on_trial_result(c, trial, {"loss": 0.5}), "time_attr 'training_iteration'")
    raises_one(lambda: s.on_trial_result(c, trial, {"training_iteration": 1, "loss": "nan?"}), "'loss'", "number")


@pytest.mark.parametrize("name", sorted(ALL))
def test_metric_or_mode_never_set(name):
    trial = Trial()
    raises_one(lambda: ALL[name]().on_trial_add(Controller(trial), trial), "metric is not set")
    raises_one(lambda: ALL[name](metric="loss").on_trial_add(Controller(trial), trial), "mode is not set")
    s = ALL[name]()
    assert s.set_search_properties("loss", "min")
    s.on_trial_add(Controller(trial), trial)  # set by tune.run: fine


@pytest.mark.parametrize("name", sorted(ALL))
def test_search_properties(name):
    s = ALL[name](metric="loss", mode="min")
    assert s.set_search_properties("loss", "min")
    assert not s.set_search_properties("accuracy", "max")  # a conflict the caller reports
    raises_one(lambda: ALL[name]().set_search_properties("loss", "minimize"), "mode")


def test_pbt_mutation_of_a_key_absent_from_the_config():
    s = PopulationBasedTraining(metric="r", mode="max", hyperparam_mutations={"lr": [0.1], "batch_size": [32, 64]})
    raises_one(lambda: s.set_search_properties(None, None, config={"lr": 0.1}), "hyperparam_mutations", "'batch_size'")
    trial = Trial(config={"lr": 0.1, "momentum": 0.9})
    raises_one(lambda: s.on_trial_add(Controller(trial), trial), "'batch_size'", "momentum")
    nested = PopulationBasedTraining(metric="r", mode="max", hyperparam_mutations={"opt": {"lr": [0.1]}})
    raises_one(lambda: nested.set_search_properties(None, None, config={"opt": {"eps": 1}}), "'opt/lr'")
    raises_one(lambda: nested.set_search_properties(None, None, config={"opt": 3}), "'opt'")
    assert s.set_search_properties(None, None, config={"lr": 0.1, "batch_size": 32, "other": 1})
    s.on_trial_add(Controller(), Trial(config={"lr": 0.1, "batch_size": 32}))


def test_pb2_bound_of_a_key_absent_from_the_config_or_not_a_number():
    s = PB2(metric="r", mode="max", hyperparam_bounds={"lr": [1e-4, 1e-2], "opt": {"eps": [1e-8, 1e-6]}})
    raises_one(lambda: s.set_search_properties(None, None, config={"lr": 0.1}), "hyperparam_bounds", "'opt'")
    raises_one(lambda: s.set_search_properties(None, None, config={"lr": 0.1, "opt": {"beta": 1}}), "'opt/eps'")
    trial = Trial(config={"lr": 0.1, "momentum": 0.9})
    raises_one(lambda: s.on_trial_add(Controller(trial), trial), "hyperparam_bounds", "'opt'", "momentum")
    trial = Trial(config={"lr": "fast", "opt": {"eps": 1e-7}})
    raises_one(lambda: s.on_trial_add(Controller(trial), trial), "hyperparam_bounds", "'lr'", "number", "'fast'")
    trial = Trial(config={"lr": True, "opt": {"eps": 1e-7}})
    raises_one(lambda: s.on_trial_add(Controller(trial), trial), "'lr'", "number")
    # a search-space domain where the trials will get numbers is fine before they are sampled
    assert s.set_search_properties(None, None, config={"lr": object(), "opt": {"eps": 1e-7}})
    s.on_trial_add(Controller(), Trial(config={"lr": 1e-3, "opt": {"eps": 1e-7}}))
