"""``stop``: a dict, a Stopper, or a function called as ``stop(trial_id, result) -> bool``, whose
signature is checked when the sweep starts, before any trial runs."""

from __future__ import annotations

import functools

import pytest

from tuner.stopper import FunctionStopper, MaximumIterationStopper, Stopper, to_stopper


class CallableStop:
    def __call__(self, trial_id, result):
        return result["score"] > 1


def takes_three(trial_id, result, threshold):
    return result["score"] > threshold


@pytest.mark.parametrize("stop, takes", [
    (lambda result: True, "(result)"),
    (lambda: True, "()"),
    (takes_three, "(trial_id, result, threshold)"),
    (lambda trial_id, *, result: True, "(trial_id, *, result)"),
    (lambda trial_id, result, *, strict: True, "(trial_id, result, *, strict)"),
])
def test_a_function_with_the_wrong_signature_is_one_error_naming_stop(stop, takes):
    with pytest.raises(ValueError, match=r"^stop: a function stop condition is called as stop\(trial_id, result\) "
                                         r"-> bool, but \S+ takes ") as info:
        to_stopper(stop)
    assert f" takes {takes};" in str(info.value)


def test_a_stopper_class_instead_of_an_instance_says_so():
    with pytest.raises(ValueError, match=r"^stop: MaximumIterationStopper is a Stopper class; pass an instance"):
        to_stopper(MaximumIterationStopper)


@pytest.mark.parametrize("stop", [
    lambda trial_id, result: result["score"] > 1,
    lambda *args: args[1]["score"] > 1,
    lambda trial_id, result, threshold=1: result["score"] > threshold,
    functools.partial(takes_three, threshold=1),
    CallableStop(),
])
def test_functions_that_can_be_called_with_trial_id_and_result_are_accepted(stop):
    stopper = to_stopper(stop)
    assert isinstance(stopper, FunctionStopper)
    assert stopper("t1", {"score": 2}) is True and stopper("t1", {"score": 0}) is False


def test_a_stopper_instance_and_a_function_whose_signature_cannot_be_read_are_accepted():
    stopper = MaximumIterationStopper(3)
    assert to_stopper(stopper) is stopper
    assert isinstance(to_stopper(Stopper()), Stopper)
    assert isinstance(to_stopper(max), FunctionStopper)  # a builtin: inspect.signature cannot read it
