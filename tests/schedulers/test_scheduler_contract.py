"""The contract every scheduler keeps, checked on synthetic learning curves through the simulator.

- every decision is CONTINUE, PAUSE or STOP, and a scheduler that says ``never_pauses`` never
  answers PAUSE;
- STOP is final: a stopped trial reports nothing more and is never started again;
- a state round trip (state_dict -> fresh instance -> load_state_dict, through pickle) at any
  point changes no later decision, and the state is plain data;
- min and max are mirror images: negating every metric and flipping the mode gives identical
  decisions (and identical exploits);
- the sweep ends with every trial TERMINATED.
"""

from __future__ import annotations

import doctest
import importlib
import pickle

import pytest

from schedulers import TERMINATED, TrialScheduler
from schedulers.simulator import Simulator
from tests.schedulers.scheduler_curves import SCHEDULERS, curve_fn, make_configs, negated

CONFIGS = make_configs()
SETTINGS = [(1, "upfront"), (3, "upfront"), (1, "lazy"), (3, "lazy")]


def run(name: str, n_slots: int, add: str, *, mode: str = "max", fn=curve_fn, swap_at: int | None = None):
    sim = Simulator(
        SCHEDULERS[name](), fn, CONFIGS, n_slots=n_slots, metric="score", mode=mode,
        max_iterations=27, add_trials=add,
    )
    if swap_at is not None:
        assert sim.run(max_results=swap_at) is None
        state = pickle.loads(pickle.dumps(sim.scheduler.state_dict()))
        assert_plain(state)
        fresh = SCHEDULERS[name]()
        assert fresh.set_search_properties("score", mode)
        fresh.load_state_dict(state)
        sim.scheduler = fresh
    return sim.run()


def assert_plain(value, path="state"):
    """Only builtin containers and scalars: what a store can keep and a new version can read."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, (str, int)), f"{path}: key {k!r}"
            assert_plain(v, f"{path}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            assert_plain(v, f"{path}[{i}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), f"{path}: {type(value).__name__}"


@pytest.fixture(scope="module")
def baselines():
    return {}


def baseline(baselines, name, n_slots, add):
    key = (name, n_slots, add)
    if key not in baselines:
        baselines[key] = run(name, n_slots, add)
    return baselines[key]


@pytest.mark.parametrize("n_slots,add", SETTINGS)
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_decisions_are_valid_and_stop_is_final(baselines, name, n_slots, add):
    res = baseline(baselines, name, n_slots, add)
    decisions = {d for _, _, d in res.decisions}
    assert decisions <= set(TrialScheduler.DECISIONS)
    scheduler = SCHEDULERS[name]()
    if scheduler.never_pauses:
        assert TrialScheduler.PAUSE not in decisions
    ended: set[str] = set()
    for event in res.events:
        assert event.trial_id not in ended, f"{event} after the trial was stopped"
        if (event.kind == "result" and event.detail == TrialScheduler.STOP) or event.kind == "stop_trial":
            ended.add(event.trial_id)
    assert all(t.status == TERMINATED for t in res.trials.values())
    assert len(res.trials) == len(CONFIGS)


@pytest.mark.parametrize("n_slots,add", SETTINGS)
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_state_round_trip_changes_no_later_decision(baselines, name, n_slots, add):
    res = baseline(baselines, name, n_slots, add)
    total = len(res.decisions)
    for swap_at in sorted({1, total // 5, total // 2, (4 * total) // 5, total - 1}):
        resumed = run(name, n_slots, add, swap_at=swap_at)
        assert resumed.events == res.events, f"decisions differ after a state round trip at result {swap_at}"


@pytest.mark.parametrize("n_slots,add", SETTINGS)
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_min_and_max_are_mirror_images(baselines, name, n_slots, add):
    res = baseline(baselines, name, n_slots, add)
    mirrored = run(name, n_slots, add, mode="min", fn=negated(curve_fn))
    assert mirrored.events == res.events
    assert mirrored.budget_used == res.budget_used


def test_the_contract_is_not_vacuous(baselines):
    """The curves make every scheduler do what it is for, so the checks above bite."""
    kinds = {}
    for name in SCHEDULERS:
        res = baseline(baselines, name, 3, "upfront")
        kinds[name] = {d for _, _, d in res.decisions} | {e.kind for e in res.events}
    assert kinds["fifo"] == {"CONTINUE", "add", "start", "result", "complete"}
    for name in ("asha", "asha_brackets", "median"):
        assert "STOP" in kinds[name], name
    for name in ("asha_promotion", "hyperband", "median_soft", "pbt_synch"):
        assert "PAUSE" in kinds[name], name
    assert "stop_trial" in kinds["hyperband"]
    for name in ("pbt", "pbt_synch", "pb2", "pb2_synch"):
        assert {"exploit", "checkpoint"} <= kinds[name], name


def test_a_lost_piece_of_state_is_caught():
    """The round-trip check fails for a scheduler that forgets part of its state."""

    from schedulers import ASHAScheduler

    class Forgetful(ASHAScheduler):
        def load_state_dict(self, state):
            super().load_state_dict(state)
            self._recorded = [[{} for _ in rungs] for rungs in self._recorded]

    def factory():
        return Forgetful(max_t=27, grace_period=1, reduction_factor=3)

    SCHEDULERS["_forgetful"] = factory
    try:
        res = run("_forgetful", 3, "upfront")
        resumed = run("_forgetful", 3, "upfront", swap_at=len(res.decisions) // 2)
        assert resumed.events != res.events
    finally:
        del SCHEDULERS["_forgetful"]


@pytest.mark.parametrize(
    "module", ["schedulers.asha", "schedulers.hyperband", "schedulers.median_stopping", "schedulers.pbt",
               "schedulers.pb2", "schedulers.simulator", "schedulers.trial_scheduler"]
)
def test_docstring_examples(module):
    failures, _ = doctest.testmod(importlib.import_module(module))
    assert failures == 0


def test_no_scheduler_module_imports_tuner_or_algorithms_even_lazily():
    """schedulers/ is the lowest layer: what it needs from above (a stored sweep's PBT schedule)
    is handed to it (``set_stored_policy_reader``)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "schedulers"
    offending = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offending += [f"{path.name} imports {n}" for n in names if n.split(".")[0] in ("tuner", "algorithms")]
    assert offending == []


def test_package_is_pure_python():
    import subprocess
    import sys

    code = "import sys, schedulers, schedulers.simulator; print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'tuner')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
