"""Function trainables that the CLI tests name in their specs (``tests.tuner.cli.cli_trainables:...``),
and that other tests share."""

from __future__ import annotations

import json
import os
import time

from tuner import tune


def quadratic(config):
    """Score -(x - 0.7)^2 * i over ``iterations`` steps; raises at once when ``fail`` is true."""
    if config.get("fail"):
        raise RuntimeError("this trial was told to fail")
    for i in range(1, config.get("iterations", 6) + 1):
        time.sleep(config.get("sleep", 0.0))
        tune.report({"score": -((config["x"] - 0.7) ** 2) * i, "step": i})


def checkpointed(config):
    """``iterations`` slow steps with a checkpoint each; restarts from its last checkpoint. With
    ``hold_after: N`` it waits after its N-th step until the file ``release`` exists."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"]
    for i in range(start + 1, config["iterations"] + 1):
        time.sleep(config["sleep"])
        if i == config.get("hold_after", 0) + 1:  # wait (2 minutes at most) for the test's go-ahead
            deadline = time.monotonic() + 120
            while not os.path.exists(config["release"]) and time.monotonic() < deadline:
                time.sleep(0.02)
        directory = os.path.join(tune.get_context().get_trial_dir(), f"checkpoint_{i:04d}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"i": i}, f)
        tune.report({"score": config["x"] * i}, checkpoint=tune.Checkpoint.from_directory(directory))


def echo_note(config):
    """Reports ``score`` = x and the config's ``note`` (a string of any length) for 2 steps."""
    for _ in range(2):
        tune.report({"score": config["x"], "note": config["note"]})


def unbounded(config):
    """Reports +inf, then -inf with a metric the first result did not have."""
    tune.report({"score": float("inf")})
    tune.report({"score": float("-inf"), "late": 1.0})


def fails_once(config):
    """``iterations`` (default 6) iterations, a checkpoint each, going on from its checkpoint;
    reports ``resumed_from`` (the iteration it went on from). When ``fail_once`` names a file that
    does not exist yet, it makes it and fails at iteration 4: the first run fails, the next does not."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"]
    for i in range(start + 1, config.get("iterations", 6) + 1):
        marker = config.get("fail_once")
        if i == 4 and marker and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("failed once")
        directory = os.path.join(tune.get_context().get_trial_dir(), f"state_{i}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"i": i}, f)
        tune.report({"score": float(i), "resumed_from": start}, checkpoint=tune.Checkpoint.from_directory(directory))
