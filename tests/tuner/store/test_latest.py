"""A trial's newest result is held back between writes of its last_result (each rewrites the
trial's whole row), and never overwrites a last_result an update set after it."""

from __future__ import annotations

import pytest

from tuner.store.latest import HeldLatest
from tuner.store.ops import LatestResult
from tuner.store.plan import LastResults


def _step(superseded=(), **rows: int) -> LastResults:
    return LastResults({t: LatestResult(1, str(i), 0.0) for t, i in rows.items()}, set(superseded))


def test_each_trials_newest_result_is_written_at_most_once_per_interval_and_all_on_a_flush():
    held = HeldLatest(interval_s=0.5)
    held.take(_step(a=1, b=1))
    assert sorted(held.due(10.0).rows) == ["a", "b"] and not held  # never written before: due at once
    held.take(_step(a=2))
    assert held.due(10.2) is None and held.wait_s(10.2) == pytest.approx(0.3)  # written 0.2 s ago: held
    held.take(_step(a=3, b=2))
    assert {t: r.text for t, r in held.due(10.5).rows.items()} == {"a": "3", "b": "2"}
    held.take(_step(a=4))
    assert held.due(10.6, everything=True).rows["a"].text == "4" and held.wait_s(10.6) is None


def test_an_update_of_last_result_drops_the_held_result_it_comes_after():
    held = HeldLatest(interval_s=0.5)
    held.take(_step(a=1))
    held.due(0.0)
    held.take(_step(a=2, b=2))  # held: written 0 s ago
    held.take(_step(superseded=["a"]))  # the controller set a's last_result (a status change) since
    assert list(held.due(1.0).rows) == ["b"]
    held.take(_step(superseded=["b"], b=3))  # an update, then a newer result in the same batch
    assert held.due(2.0).rows["b"].text == "3"
