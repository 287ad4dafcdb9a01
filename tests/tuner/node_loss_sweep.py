"""Run by test_node_loss in a process of its own: a 3-node Ray cluster on this machine, a sweep,
and the node that hosts the trial removed mid-run. Prints one JSON line with what happened."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import ray
from ray.cluster_utils import Cluster

from tuner import tune


def train(config):
    ckpt = tune.get_checkpoint()
    start = 0
    if ckpt is not None:
        with open(os.path.join(ckpt.path, "i.json")) as f:
            start = json.load(f)["i"] + 1
    node = ray.get_runtime_context().get_node_id()
    for i in range(start, 10):
        time.sleep(0.3)
        d = os.path.join(tune.get_context().get_trial_dir(), f"tmp_{i}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "i.json"), "w") as f:
            json.dump({"i": i}, f)
        tune.report({"i": i, "node": node, "resumed_from": start}, checkpoint=tune.Checkpoint.from_directory(d))


def main(storage: str) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR")
    removed: dict[str, str] = {}

    def remove_the_trials_node() -> None:
        db = os.path.join(storage, "nodes", "tuner.db")
        deadline = time.time() + 120
        while time.time() < deadline:
            time.sleep(0.2)
            try:
                analysis = tune.load(os.path.join(storage, "nodes"))
                frame = analysis.results_df
                analysis.close()
            except Exception:  # noqa: BLE001 - not created yet
                continue
            if len(frame) >= 3 and os.path.exists(db):
                node_id = frame["node"].iloc[-1]
                for node in workers:
                    if node.node_id == node_id:
                        cluster.remove_node(node)
                        removed["node"] = node_id
                        return

    watcher = threading.Thread(target=remove_the_trials_node, daemon=True)
    watcher.start()
    analysis = tune.run(
        train, config={}, resources_per_trial={"cpu": 1}, max_failures=3, storage_path=storage, name="nodes", verbose=0
    )
    watcher.join(timeout=5)
    (trial,) = analysis.trials
    frame = analysis.trial_dataframes[trial.trial_id]
    print(json.dumps({
        "removed": removed.get("node"),
        "status": trial.status,
        "num_failures": trial.num_failures,
        "iterations": frame["i"].tolist(),
        "nodes": frame["node"].tolist(),
        "resumed_from": frame["resumed_from"].tolist(),
    }))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
