"""A sweep's placement groups are visibly back in Ray before the next sweep asks for its own."""

from __future__ import annotations

from tuner import tune
from tuner.execution.placement_release import await_release


def _noop(config):
    tune.report({"score": config["x"]})


def test_resources_show_as_available_once_the_release_is_awaited(ray_session, tmp_path):
    tune.run(
        _noop,
        config={"x": tune.grid_search([1, 2, 3, 4])},
        resources_per_trial={"cpu": 1},
        metric="score",
        mode="max",
        storage_path=str(tmp_path),
        name="release",
        verbose=0,
        tensorboard=False,
    )
    # a loaded machine may take longer than a sweep waits (RELEASE_WAIT_S): the test waits for the event
    assert await_release(timeout_s=60.0), "the watch never saw the sweep's CPUs come back"
    assert ray_session.available_resources().get("CPU", 0.0) >= ray_session.cluster_resources()["CPU"] - 1e-9
