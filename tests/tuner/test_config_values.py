"""A config value that cannot be sent to the trials (an open file, a socket, a lock, a generator)
is one ValueError naming its key path and type, before anything is written; the values a config
legitimately holds (functions, classes, arrays, domains, sample_from functions) still work."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
import torch

from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")


def train(config):
    tune.report({"score": 1.0})


class _Holder:
    def __init__(self, handle):
        self.handle = handle


def _bad_configs(tmp_path):
    log = open(tmp_path / "log.txt", "w+")  # noqa: SIM115 - the value under test
    log.write("hello\n")
    log.flush()
    (tmp_path / "data.bin").write_bytes(b"\0")
    data = open(tmp_path / "data.bin", "rb")  # noqa: SIM115
    sock = socket.socket()
    return [
        ({"env": {"log": log}}, r"config\['env'\]\['log'\]: a _io.TextIOWrapper \(an open file\) cannot be sent to "
                                r"the trials: each would get at best a copy of its contents, not the file; pass its "
                                r"path instead"),
        ({"data": data}, r"config\['data'\]: a _io.BufferedReader \(an open file\)"),
        ({"net": sock}, r"config\['net'\]: a socket.socket cannot be sent to the trials \(cannot pickle 'socket' "
                        r"object\); pass plain data, or what the trial can make it from"),
        ({"guard": threading.Lock()}, r"config\['guard'\]: a _thread.lock cannot be sent"),
        ({"xs": (i for i in range(3))}, r"config\['xs'\]: a generator cannot be sent"),
        ({"a": tune.grid_search([1, log])}, r"config\['a'\]\['grid_search'\]\[1\]: a _io.TextIOWrapper"),
        ({"a": tune.choice([threading.Lock()])}, r"config\['a'\].categories\[0\]: a _thread.lock"),
        ({"h": [_Holder(log)]}, r"config\['h'\]\[0\].handle: a _io.TextIOWrapper"),
    ], (log, data, sock)


def test_a_value_that_cannot_be_sent_is_named_before_anything_is_written(tmp_path):
    cases, handles = _bad_configs(tmp_path)
    try:
        for config, match in cases:
            with pytest.raises(ValueError, match=f"^{match}"):
                tune.run(train, config=config, storage_path=str(tmp_path / "runs"), name="bad", verbose=0)
            assert not (tmp_path / "runs" / "bad").exists()
    finally:
        for handle in handles:
            handle.close()


def _env_creator(env_config):
    return {"made": env_config}


def check_values(config):
    assert config["fn"](config["arr"]) == 3.0 and config["cls"] is torch.nn.Linear
    assert config["env_creator"]({"x": 1}) == {"made": {"x": 1}}
    assert 0 <= config["lr"] < 1 and config["derived"] == config["lr"] * 2 and config["opt"] in ("adam", "sgd")
    tune.report({"score": float(config["arr"].sum())})


def test_legitimate_values_still_work(tmp_path):
    guard = threading.Lock()  # a sample_from function runs in the driver: what it closes over is never sent

    def derived(spec):
        with guard:
            return spec.config.lr * 2

    config = {"fn": np.sum, "arr": np.ones(3), "cls": torch.nn.Linear, "env_creator": _env_creator,
              "lr": tune.uniform(0, 1), "derived": tune.sample_from(derived), "opt": tune.choice(["adam", "sgd"])}
    analysis = tune.run(check_values, config=config, metric="score", mode="max", storage_path=str(tmp_path),
                        name="fine", verbose=0)
    assert [(t.status, t.last_result["score"]) for t in analysis.trials] == [("TERMINATED", 3.0)]
    analysis.close()
