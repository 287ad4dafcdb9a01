"""tune.with_parameters puts a large object in Ray's object store once, whatever the number of
trials (measured in the object store); tune.with_resources sets what each trial reserves."""

from __future__ import annotations

import time

import numpy as np
import pytest
import ray

from tuner import tune
from tuner.trainable.util import Parameter

pytestmark = pytest.mark.usefixtures("ray_session")

MIB = 2**20
SIZE = 50 * MIB


def object_store() -> tuple[int, int]:
    """(bytes used, objects) in the object store of every node, as Ray's raylets report them."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    stats = get_memory_info_reply(get_state_from_address(ray.get_runtime_context().gcs_address)).store_stats
    return int(stats.object_store_bytes_used), int(stats.num_local_objects)


def read_data(config, data=None, scale=None):
    for _ in range(2):
        time.sleep(0.2)  # every trial holds the array while the others run
        tune.report({
            "sum": float(data.sum()) * scale,
            "nbytes": data.nbytes,
            "zero_copy": not data.flags.writeable,  # a view of the object store, not a private copy
            "resources": tune.get_context().get_trial_resources(),
        })


class Sampled(tune.Callback):
    """Reads the object store's usage at every result, while the trials run."""

    def __init__(self):
        self.usage = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.usage.append(object_store())


def test_a_50_mb_array_goes_to_the_object_store_once_for_8_trials(tmp_path):
    data = np.random.default_rng(0).random(SIZE // 8)
    before, _ = object_store()
    trainable = tune.with_parameters(read_data, data=data, scale=2.0)
    after_put, _ = object_store()
    assert after_put - before >= 0.95 * SIZE  # put at once, by the driver
    sampled = Sampled()
    grid = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 0.5}),
        param_space={"i": tune.grid_search(list(range(8)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=4),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="shared", verbose=0, tensorboard=False,
                                  callbacks=[sampled]),
    ).fit()
    assert len(grid) == 8 and grid.num_terminated == 8
    for result in grid:
        assert result.metrics["sum"] == pytest.approx(2.0 * float(data.sum()))
        assert result.metrics["nbytes"] == SIZE and result.metrics["zero_copy"] is True
        assert result.metrics["resources"] == [{"CPU": 0.5}]
    # While up to 4 trials held the array, the object store held one copy of it, not one per trial.
    assert len(sampled.usage) == 16
    peak = max(used for used, _ in sampled.usage)
    assert SIZE * 0.95 <= peak - before < SIZE * 1.5, (before, after_put, sampled.usage)
    # The wrapper carries the object's ObjectRef, not the array: every trial got that one object.
    assert isinstance(trainable._tune_parameters["data"].ref, ray.ObjectRef)
    grid.analysis.close()


def test_parameter_pickles_as_its_object_ref():
    param = Parameter(np.arange(10))
    clone = ray.cloudpickle.loads(ray.cloudpickle.dumps(param))
    assert clone.ref == param.ref and list(clone.get()) == list(range(10))


def test_wrong_trainables_and_resources_are_clear_errors():
    with pytest.raises(ValueError, match="with_parameters.. works with a function trainable or a tune.Trainable"):
        tune.with_parameters(object, data=1)
    with pytest.raises(ValueError, match="with_resources: resources"):
        tune.with_resources(read_data, {"cpu": -1})
    with pytest.raises(ValueError, match="with_resources"):
        tune.with_resources(read_data, "two cpus")
