"""ConcurrencyLimiter: caps live trials, passes everything else through, resumes."""

from __future__ import annotations

import pickle

import pytest
from optuna.trial import TrialState

from tuner.search import (
    BasicVariantGenerator,
    ConcurrencyLimiter,
    OptunaSearch,
    Searcher,
    uniform,
)

SPACE = {"x": uniform(0, 1)}


def limited(max_concurrent, num_samples=6, batch=False, seed=0):
    limiter = ConcurrencyLimiter(BasicVariantGenerator(random_state=seed), max_concurrent,
                                 batch=batch)
    assert limiter.set_search_properties("loss", "min", SPACE, num_samples=num_samples)
    return limiter


def test_bad_arguments_name_the_field():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="max_concurrent"):
            ConcurrencyLimiter(BasicVariantGenerator(), bad)
    with pytest.raises(ValueError, match="searcher"):
        ConcurrencyLimiter(object(), 2)


def test_caps_live_trials_and_frees_a_slot_on_complete():
    limiter = limited(2, num_samples=4)
    assert isinstance(limiter.suggest("a"), dict)
    assert isinstance(limiter.suggest("b"), dict)
    assert limiter.suggest("c") is None and limiter.suggest("c") is None
    assert limiter.live_trials == {"a", "b"}
    limiter.on_trial_result("a", {"loss": 1.0, "training_iteration": 1})
    assert limiter.suggest("c") is None  # a result frees nothing
    limiter.on_trial_complete("a", {"loss": 1.0}, error=True)
    assert isinstance(limiter.suggest("c"), dict)
    assert limiter.suggest("d") is None
    limiter.on_trial_complete("unknown")  # ignored
    limiter.on_trial_complete("b")
    limiter.on_trial_complete("c")
    assert isinstance(limiter.suggest("d"), dict)
    limiter.on_trial_complete("d")
    assert limiter.suggest("e") == Searcher.FINISHED
    assert limiter.live_trials == set()


def test_the_limited_searcher_gives_the_same_configs_as_unlimited():
    limiter = limited(1, num_samples=5, seed=4)
    plain = BasicVariantGenerator(random_state=4)
    plain.set_search_properties("loss", "min", SPACE, num_samples=5)
    got = []
    for i in range(5):
        config = limiter.suggest(f"t{i}")
        got.append(config)
        assert limiter.suggest(f"u{i}") is None  # the one slot is taken
        limiter.on_trial_complete(f"t{i}", {"loss": 0.0})
    assert got == [plain.suggest(f"t{i}") for i in range(5)]


def test_batch_mode_waits_for_the_whole_batch():
    inner = OptunaSearch(metric="loss", mode="min", seed=0)
    limiter = ConcurrencyLimiter(inner, 2, batch=True)
    assert limiter.set_search_properties(None, None, SPACE)
    limiter.suggest("a"), limiter.suggest("b")
    limiter.on_trial_complete("a", {"loss": 1.0})
    assert limiter.suggest("c") is None  # b still runs: the batch is not done
    states = [t.state for t in inner.study.get_trials(deepcopy=False)]
    assert states == [TrialState.RUNNING, TrialState.RUNNING]  # Optuna told nothing yet
    limiter.on_trial_complete("b", {"loss": 2.0}, pruned=True)
    states = [t.state for t in inner.study.get_trials(deepcopy=False)]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED]
    assert isinstance(limiter.suggest("c"), dict)


def test_results_and_pruned_flag_reach_the_wrapped_searcher():
    inner = OptunaSearch(metric="loss", mode="max", seed=0)
    limiter = ConcurrencyLimiter(inner, 3)
    assert limiter.metric == "loss" and limiter.mode == "max"
    assert limiter.set_search_properties(None, None, SPACE)
    limiter.suggest("a")
    limiter.on_trial_result("a", {"loss": 0.5, "training_iteration": 1})
    limiter.on_trial_complete("a", {"loss": 0.5, "training_iteration": 1}, pruned=True)
    trial = inner.study.get_trials(deepcopy=False)[0]
    assert trial.state == TrialState.PRUNED and trial.intermediate_values == {1: 0.5}
    # a searcher whose on_trial_complete takes no extra keywords still works
    bvg = limited(1)
    bvg.suggest("a")
    bvg.on_trial_complete("a", {"loss": 1.0}, pruned=True)
    assert isinstance(bvg.suggest("b"), dict)


def test_metric_and_mode_come_from_the_wrapped_searcher():
    limiter = ConcurrencyLimiter(OptunaSearch(), 2)
    assert limiter.metric is None
    assert limiter.set_search_properties("acc", "max", SPACE)
    assert (limiter.metric, limiter.mode) == ("acc", "max")
    conflicting = ConcurrencyLimiter(OptunaSearch(metric="loss", mode="min"), 2)
    assert not conflicting.set_search_properties("acc", "min", SPACE)


def test_state_round_trip_keeps_live_trials_and_the_wrapped_searchers_state():
    def build():
        limiter = ConcurrencyLimiter(OptunaSearch(metric="loss", mode="min", seed=5), 2)
        assert limiter.set_search_properties(None, None, SPACE)
        return limiter

    original = build()
    for i in range(12):
        config = original.suggest(f"t{i}")
        original.on_trial_complete(f"t{i}", {"loss": (config["x"] - 0.3) ** 2})
    original.suggest("live1"), original.suggest("live2")
    state = pickle.loads(pickle.dumps(original.state_dict()))
    assert sorted(state["live"]) == ["live1", "live2"]

    restored = build()
    restored.load_state_dict(state)
    assert restored.suggest("x") is None  # both slots are still taken
    for limiter in (original, restored):
        limiter.on_trial_complete("live1", {"loss": 1.0})
    assert restored.suggest("t12") == original.suggest("t12")
    assert restored.suggest("t13") is None
    restored.on_trial_complete("live2", {"loss": 1.0})  # known to the restored Optuna study
    assert restored.searcher.study.get_trials(deepcopy=False)[13].state == TrialState.COMPLETE
    with pytest.raises(ValueError, match="state"):
        restored.load_state_dict({"max_concurrent": 2})


def test_batch_state_round_trip_keeps_the_cached_completions():
    original = limited(2, num_samples=6, batch=True)
    original.suggest("a"), original.suggest("b")
    original.on_trial_complete("a", {"loss": 1.0})
    restored = limited(2, num_samples=6, batch=True)
    restored.load_state_dict(pickle.loads(pickle.dumps(original.state_dict())))
    assert restored.suggest("c") is None
    restored.on_trial_complete("b", {"loss": 2.0})
    original.on_trial_complete("b", {"loss": 2.0})
    assert restored.suggest("c") == original.suggest("c")


class _SelfLimiting(Searcher):
    """A searcher that enforces max_concurrent itself (Ray's set_max_concurrency contract)."""

    def __init__(self):
        super().__init__()
        self.limit = None

    def set_max_concurrency(self, max_concurrent):
        self.limit = max_concurrent
        return True

    def set_search_properties(self, metric, mode, config, **spec):
        return super().set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id):
        return {"id": trial_id}


def test_a_searcher_that_limits_itself_is_left_to_do_so():
    inner = _SelfLimiting()
    limiter = ConcurrencyLimiter(inner, 1)
    assert limiter.set_search_properties("loss", "min", {})
    assert inner.limit == 1
    assert limiter.suggest("a") == {"id": "a"} and limiter.suggest("b") == {"id": "b"}
