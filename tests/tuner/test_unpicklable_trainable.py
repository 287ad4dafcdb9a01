"""A trainable that cannot be pickled (a closure over a lock) is one clear error naming what
cannot be pickled, and it leaves nothing behind: the corrected call reuses the name."""

from __future__ import annotations

import threading

import pytest

from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def _locked_trainable():
    guard = threading.Lock()

    def train(config):
        with guard:
            tune.report({"score": config["x"]})

    return train


def train(config):
    tune.report({"score": config["x"]})


class WithLock(tune.Trainable):
    shared = {"lock": threading.RLock()}

    def step(self):
        with self.shared["lock"]:
            return {"score": 1.0, "done": True}


def test_a_closure_over_a_lock_is_named_and_leaves_nothing(tmp_path):
    kwargs = dict(config={"x": tune.grid_search([1, 2])}, metric="score", mode="max", storage_path=str(tmp_path),
                  name="locked", verbose=0)
    with pytest.raises(ValueError, match=r"^run_or_experiment: _locked_trainable.<locals>.train cannot be sent to "
                                         r"Ray's workers: it uses guard, a _thread.lock, which cannot be pickled "
                                         r"\(cannot pickle '_thread.lock' object\); create such objects inside the "
                                         r"trainable instead$"):
        tune.run(_locked_trainable(), **kwargs)
    assert not (tmp_path / "locked").exists()
    analysis = tune.run(train, **kwargs)  # the corrected call, same name, no resume needed
    assert sorted(t.status for t in analysis.trials) == ["TERMINATED", "TERMINATED"]
    analysis.close()


def test_a_trainable_class_whose_attribute_cannot_be_pickled_is_named(tmp_path):
    # A class of the user's script (__main__) is pickled by value, its attributes with it.
    script_class = type("Script", (WithLock,), {"shared": {"lock": threading.RLock()}, "__module__": "__main__"})
    with pytest.raises(ValueError, match=r"^run_or_experiment: Script cannot be sent to Ray's workers: it uses "
                                         r"shared\['lock'\], a _thread.RLock, which cannot be pickled"):
        tune.run(script_class, storage_path=str(tmp_path), name="cls", verbose=0)
    assert not (tmp_path / "cls").exists()


def test_with_parameters_objects_are_not_pickled_by_the_check(tmp_path):
    big = list(range(1000))

    def uses(config, data=None):
        tune.report({"score": float(len(data))})

    analysis = tune.run(tune.with_parameters(uses, data=big), storage_path=str(tmp_path), name="params", verbose=0)
    assert [t.last_result["score"] for t in analysis.trials] == [1000.0]
    analysis.close()
