"""``tune.run``'s keywords and ``RunOptions``' fields are one list: the same names, in the same
order, with the same defaults and annotations, so an argument added to one is added to the other."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from tuner import tune
from tuner.run_options import RunOptions

#: tune.run's parameters that are not options of the sweep.
NOT_OPTIONS = ("run_or_experiment", "_tuner_state")


def test_tune_run_keywords_are_the_fields_of_run_options():
    params = [p for name, p in inspect.signature(tune.run).parameters.items() if name not in NOT_OPTIONS]
    fields = dataclasses.fields(RunOptions)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [f.default for f in fields]
    assert [p.annotation for p in params] == [f.type for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)


def test_run_options_are_frozen_and_taken_from_a_call_s_arguments():
    options = RunOptions.from_arguments({**RunOptions(num_samples=3).__dict__, "run_or_experiment": "x"})
    assert options == RunOptions(num_samples=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.num_samples = 4  # type: ignore[misc]
