"""What the HParams dashboard should show for a sweep, computed from its store (not from TensorBoard)."""

from __future__ import annotations

import numbers

import numpy as np

from tuner.search.variants import flatten_dict
from tuner.store import Store, default_database_url

NOT_METRICS = {"timestamp", "done", "trial_id", "iterations_since_restore"}
STATUS = {"TERMINATED": "STATUS_SUCCESS", "ERROR": "STATUS_FAILURE"}


def hparam(value):
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Real):
        return float(value)
    return repr(value)


def expected_sessions(run_dir, trainable: str) -> dict:
    """Session name -> hparams, status and the last (step, float32 value) of every numeric metric."""
    store = Store(default_database_url(run_dir), create=False)
    try:
        experiment = store.get_experiment(run_dir.name)
        out = {}
        for trial in store.trials(experiment["id"]):
            metrics = {}
            for result in store.results(experiment["id"], trial_id=trial["trial_id"]):
                for key, value in flatten_dict(result).items():
                    if isinstance(value, numbers.Real) and key not in NOT_METRICS:
                        metrics[key] = (result["training_iteration"], np.float32(value).item())
            out[f"{trainable}_{trial['trial_id']}"] = {
                "hparams": {k: hparam(v) for k, v in flatten_dict(trial["config"], sep=".").items()},
                "status": STATUS.get(trial["status"], "STATUS_UNKNOWN"),
                "metrics": metrics,
            }
        return out
    finally:
        store.close()


def check_domains(experiment: dict, sessions: dict) -> None:
    """Every session's hparam values lie in the declared domains (the dashboard's filters keep them)."""
    infos = {h["name"]: h for h in experiment["hparamInfos"]}
    for name, session in sessions.items():
        assert set(session["hparams"]) <= set(infos), name
        for key, value in session["hparams"].items():
            info = infos[key]
            if "domainDiscrete" in info:
                assert value in info["domainDiscrete"], (name, key, value, info)
            elif "domainInterval" in info:
                interval = info["domainInterval"]
                assert interval.get("minValue", 0.0) <= value <= interval.get("maxValue", 0.0), (name, key, value)
