"""Run by the two-node tests in a process of their own (a driver of the test cluster): a PBT sweep
whose trials run on both nodes and exploit each other's checkpoints, or a sweep whose trial loses
its node. Prints one JSON line with what happened."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from schedulers import PopulationBasedTraining
from tuner import tune


def train(config):
    """12 iterations (or ``iterations``), a checkpoint each, going on from its checkpoint; waits
    ``sleep`` seconds per iteration. Reports its node and how many checkpoints its folder there
    holds."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "s.json")) as f:
            start = json.load(f)["i"]
    for i in range(start + 1, config.get("iterations", 12) + 1):
        time.sleep(config.get("sleep", 0.05))
        folder = os.path.join(tune.get_context().get_trial_dir(), f"tmp_{i}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "s.json"), "w") as f:
            json.dump({"i": i}, f)
        trial_dir = tune.get_context().get_trial_dir()
        kept = sum(1 for name in os.listdir(trial_dir) if name.startswith("checkpoint_"))
        tune.report({"score": config["x"] * i, "node": ray.get_runtime_context().get_node_id(), "resumed_from": start,
                     "local_checkpoints": kept}, checkpoint=tune.Checkpoint.from_directory(folder))


class _Holder:
    def ready(self) -> bool:
        return True


def _release_when_alone(holder) -> None:
    """Give the head's CPUs back once the worker node is gone (the trial then goes on there)."""
    while sum(1 for node in ray.nodes() if node["Alive"]) > 1:
        time.sleep(0.2)
    ray.kill(holder)


def main(mode: str, storage: str, name: str) -> None:
    ray.init(address=os.environ["RAY_ADDRESS"], _node_ip_address="127.0.0.1", logging_level="WARNING",
             log_to_driver=False)
    if mode == "pbt":
        # synchronous: every trial meets the others at each perturbation point, so the bottom half
        # exploits the top half, and (1 CPU each, 2 per node) both nodes hold trials
        scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3,
                                            quantile_fraction=0.5, hyperparam_mutations={"x": [0.5, 1.0, 2.0, 4.0]},
                                            seed=0, synch=True)
        analysis = tune.run(train, config={"x": tune.grid_search([0.5, 1.0, 2.0, 4.0])}, scheduler=scheduler,
                            metric="score", mode="max", resources_per_trial={"cpu": 1}, storage_path=storage,
                            name=name, verbose=0, raise_on_failed_trial=False)
    else:  # one trial, on the worker node (the head's CPUs are held until that node is gone), killed mid-run
        head = ray.get_runtime_context().get_node_id()
        holder = ray.remote(_Holder).options(
            num_cpus=ray.cluster_resources().get("CPU", 0) - sum(n["Resources"].get("CPU", 0) for n in ray.nodes()
                                                                 if n["Alive"] and n["NodeID"] != head),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=head, soft=False)).remote()
        ray.get(holder.ready.remote())
        threading.Thread(target=_release_when_alone, args=(holder,), daemon=True).start()
        analysis = tune.run(train, config={"x": 1.0, "iterations": 40, "sleep": 0.1}, resources_per_trial={"cpu": 1},
                            max_failures=3, storage_path=storage, name=name, verbose=0, raise_on_failed_trial=False)
    report = {"trials": [], "head": ray.get_runtime_context().get_node_id()}
    for trial in analysis.trials:
        frame = analysis.trial_dataframes.get(trial.trial_id)
        report["trials"].append({
            "status": trial.status, "error": (trial.error or "")[-600:],
            "iterations": [] if frame is None else [int(i) for i in frame["training_iteration"]],
            "nodes": [] if frame is None else sorted(set(frame["node"])),
            "resumed_from": [] if frame is None else sorted(set(int(i) for i in frame["resumed_from"])),
            # node -> (iterations run there, the most checkpoints its folder there held)
            "per_node": {} if frame is None else {
                node: (int((frame["node"] == node).sum()), int(frame.loc[frame["node"] == node, "local_checkpoints"].max()))
                for node in set(frame["node"])},
            "checkpoint": trial.checkpoint.path if trial.checkpoint else None,
        })
    report["exploits"] = len(analysis.exploits)
    analysis.close()
    print("REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
