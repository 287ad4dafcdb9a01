"""The sweep profile's split of a trial's time (tuner show --profile), without Ray."""

from __future__ import annotations

import pytest

from tuner.execution.profiler import TrialProfile


def test_rollout_actors_booting_during_the_trials_setup_come_out_of_trial_start_not_sampling():
    # 1 s to boot the trial actor, 7 s of set-up during which the rollout actors booted for 5 s,
    # then 17 s of iterations with 16 s of sampling: the actors' 5 s came out of the set-up.
    p = TrialProfile(cpus=9.0, hold=25.0, boot=1.0, setup=7.0, rollout_start=5.0, rollout_in_setup=5.0,
                     sampling=16.0, learning=0.5, stepping=17.0)
    parts = p.parts()
    assert parts["start"] == pytest.approx(3.0)
    assert parts["rollout_start"] == pytest.approx(5.0)
    assert parts["sampling"] == pytest.approx(16.0)
    assert sum(parts.values()) == pytest.approx(p.hold)


def test_rollout_actors_still_booting_after_setup_come_out_of_the_first_sampling():
    # 2 s of the actors' 5 s overlapped the set-up; the first iteration waited 3 s more for them
    p = TrialProfile(cpus=9.0, hold=25.0, boot=1.0, setup=2.0, rollout_start=5.0, rollout_in_setup=2.0,
                     sampling=19.0, learning=0.5, stepping=22.0)
    parts = p.parts()
    assert (parts["start"], parts["rollout_start"], parts["sampling"]) == pytest.approx((1.0, 5.0, 16.0))
    assert sum(parts.values()) == pytest.approx(p.hold)


def test_reused_actors_cost_nothing():
    p = TrialProfile(cpus=9.0, hold=19.0, boot=0.0, setup=0.02, sampling=18.2, learning=0.6, stepping=18.9)
    parts = p.parts()
    assert parts["rollout_start"] == 0.0 and parts["start"] == pytest.approx(0.02)
