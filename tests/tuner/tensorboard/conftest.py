"""One HParams sweep shared by the in-process plugin tests and the real-server test."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from tests.tuner.tensorboard.sweeps import SPACE, StopG2, train
from tuner import tune


@dataclasses.dataclass
class Sweep:
    run_dir: Path
    logdir: Path
    analysis: object
    #: What a reader polling the logdir during the sweep saw: (seconds since start, sessions).
    polls: list
    #: Seconds since start when tune.run returned (every trial ended and its session end written).
    returned_at: float


@pytest.fixture(scope="session")
def hparams_sweep(ray_session, tmp_path_factory) -> Sweep:
    """6 trials (grid x 2 samples): 2 run to the end, 2 are stopped by the scheduler, 2 fail.
    A thread reads the logdir through the HParams plugin while it runs."""
    from tuner.tensorboard.reader import HParamsReader

    storage = tmp_path_factory.mktemp("hparams")
    run_dir = storage / "sweep"
    logdir = run_dir / "tensorboard"
    polls: list = []
    done = threading.Event()
    start = time.monotonic()

    def poll() -> None:
        while not done.is_set():
            if logdir.is_dir():
                try:
                    polls.append((time.monotonic() - start, HParamsReader(logdir).sessions()))
                except Exception as exc:  # noqa: BLE001 - recorded; a test looks at it
                    polls.append((time.monotonic() - start, exc))
            done.wait(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        analysis = tune.run(
            train, config=SPACE, num_samples=2, metric="score", mode="max", scheduler=StopG2(),
            resources_per_trial={"cpu": 0.5}, storage_path=str(storage), name="sweep", verbose=0,
            raise_on_failed_trial=False, seed=0,
        )
        returned_at = time.monotonic() - start
    finally:
        done.set()
        poller.join()
    return Sweep(run_dir, logdir, analysis, polls, returned_at)
