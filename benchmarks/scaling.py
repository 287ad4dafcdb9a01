"""Evaluator scaling: env steps/s of one PPO trainer against its number of rollout actors, and where the CPU goes.

The RLlib paper's near-linear evaluator scaling, on the slow, uneven simulator of issue 17
(``tuner/SlowCartPole-v1``: a step sleeps ``--fast-ms``, 3 ms, or ``--slow-ms``, 100 ms, with
probability ``--slow-prob``, 3 %). One PPO trainer (``algorithms.PPO(config=...)``, outside a sweep)
with N rollout actors of one env each, ``sample_async=True``, 1 CPU per actor told to Ray, each actor
sampling ``--batch-per-actor`` (256) env steps per iteration, the PPO defaults otherwise; for each N of
``--actors`` (1, 2, 4, 8, 16, 32):

* throughput: env steps/s over whole ``train()`` iterations during ``--seconds`` (10), after a
  warm-up (the first iteration, which starts the actors, more until every actor is up, and one
  untimed iteration so that fragments sampled ahead are not counted), against the ideal
  N / mean step time, the mean step measured on this machine just before each point
  (``algorithms.envs.builtin.measure_mean_step``: ``time.sleep`` overshoots, more so on a busy machine);
* CPU, read from ``/proc`` (utime + stime of each process, and ``/proc/stat`` for the machine)
  at both ends of the measured interval, and again over ``--idle-seconds`` (4) with the actors at
  rest (no requests: the queued fragments are left to finish first), split into the rollout
  actors (their pids from Ray's actor table), the learner (the process that runs ``train()``),
  Ray's own processes (raylets, GCS, dashboard, agents, idle workers: the process trees of the
  Ray nodes) and the rest of the machine (other users, the kernel). Printed in cores (CPU-s per
  s: 2.00 is both cores of the development machine busy) and as costs: each actor's CPU at rest,
  per 1,000 env steps in the actors, the learner and Ray's processes; from those, the number of
  actors at which the machine's cores saturate, and Ray's processes one by one at the largest N.

``--cluster``: ``single`` (one Ray node, the trainer in this process), ``4-node`` (a
``ray.cluster_utils.Cluster`` of a head and 3 workers on this machine, ceil(N/4) + 1 CPUs each:
the trainer runs in a Ray actor in bundle 0 of its own ``default_resource_request`` placement
group, made with strategy SPREAD, so its rollout actors land in bundles on all four nodes, as in a
sweep on a cluster), or ``both`` (the default; then also the 4-node curve against the single
node's). The nodes share this machine's cores: the 4-node curve measures what Ray's multi-node
machinery (4 raylets, objects moved between node object stores) costs, not more cores. One more
difference between the two: Ray sets ``OMP_NUM_THREADS=1`` in its actors, so the 4-node learner's
numpy (OpenBLAS) runs one thread, while the single-node learner in this process runs one per core
unless the environment says otherwise; ``OMP_NUM_THREADS=1 python benchmarks/scaling.py`` makes
them alike (the rollout actors have it either way).

``--requests-per-actor``: 0 (the default) samples with streams (each actor steps its env without
pause; the learner takes what they sampled); N >= 1 with sample requests instead
(``max_requests_in_flight_per_worker=N``: the learner takes the first fragments to arrive; with 2,
an actor whose fragment is done while the learner learns starts its next one at once). A busy machine shows in the ``other`` column (other users' processes); its load also makes
sleeps overshoot more, hence the mean step measured before each point. At small N a point's rate
moves by several % with the number of 100 ms steps drawn in its few thousand steps (seeded: actor 1
draws 2.4 % in its first 2,000, so 1 actor runs above the 3 % ideal).

``--cpu-bound``: the env busy-waits for its step time instead of sleeping, so each actor needs a
real core: on the 2-core development machine that saturates at 2 actors (1 with the learner's
share); it is meant for a machine with many real cores (the 16-core device machine, when lent).

    python benchmarks/scaling.py                               # both curves, about 10 minutes on 2 cores
    python benchmarks/scaling.py --cluster single --actors 1,8,32 --seconds 6
    python benchmarks/scaling.py --cpu-bound --actors 1,2,4,8,16 --cluster single   # 16 real cores
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Ray's workers start from this process's environment: they import algorithms from this tree.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

NODES = 4
CLUSTER_MODES = ("single", "4-node", "both")
BUSY_ENV = "scaling/BusyCartPole"
TICK = os.sysconf("SC_CLK_TCK")
#: Bounds on the wait for the actors' queued fragments to finish before the at-rest window.
DRAIN_MIN_S, DRAIN_MAX_S = 1.0, 30.0
#: At most this many warm-up iterations while waiting for every rollout actor to be up.
MAX_WARMUP_ITERATIONS = 30


# ------------------------------------------------------------------------------------------
# The CPU-bound simulator
# ------------------------------------------------------------------------------------------
def _busy_cartpole_class() -> type:
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    from algorithms.envs.builtin import SlowCartPole

    class BusyCartPole(SlowCartPole):
        """SlowCartPole whose step burns CPU (a busy loop) for its step time instead of sleeping."""

        def step(self, action: Any):
            slow = self.slow_prob > 0 and self._delays.random() < self.slow_prob
            deadline = time.perf_counter() + (self.slow_s if slow else self.fast_s)
            while time.perf_counter() < deadline:
                pass
            return CartPoleEnv.step(self, action)

    return BusyCartPole


def busy_env_creator(env_config: dict[str, Any]) -> Any:
    """A BusyCartPole with CartPole-v1's 500-step time limit (as the registered SlowCartPole has)."""
    import gymnasium as gym

    return gym.wrappers.TimeLimit(_busy_cartpole_class()(**dict(env_config)), max_episode_steps=500)


def measure_busy_mean_step(env_config: dict[str, Any], fast_steps: int = 200, slow_steps: int = 5) -> float:
    """Seconds per step of one BusyCartPole: its fast and slow steps timed apart, weighted by slow_prob."""
    from algorithms.envs.builtin import measure_mean_step

    return measure_mean_step(env_config, fast_steps, slow_steps, env_class=_busy_cartpole_class())


# ------------------------------------------------------------------------------------------
# CPU accounting from /proc
# ------------------------------------------------------------------------------------------
def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of a live process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 (state) is fields[0]
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine, summed over its cores (/proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    return (sum(values) - values[3] - values[4]) / TICK


@dataclasses.dataclass
class Snapshot:
    time: float
    machine: float
    processes: dict[int, float]


def snapshot(pids: list[int]) -> Snapshot:
    processes = {pid: cpu for pid in pids if (cpu := process_cpu_s(pid)) is not None}
    return Snapshot(time.perf_counter(), machine_cpu_s(), processes)


def process_label(proc: Any) -> str:
    """A short name for one of Ray's processes (raylet, gcs_server, DashboardAgent, dashboard, ...)."""
    try:
        cmdline = proc.cmdline()
        name = proc.name()
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return "other"
    if cmdline and cmdline[0].startswith("ray::"):
        title = cmdline[0].split()[0][len("ray::"):]
        return "idle workers" if title.startswith("IDLE") else title
    if name.startswith("python"):
        scripts = [Path(arg).stem for arg in cmdline[1:] if arg.endswith(".py")]
        return scripts[0] if scripts else name
    return name


def find_processes(
    nodes: list[Any], actor_pids: list[int], learner_pid: int, driver_pid: int
) -> dict[int, tuple[str, str]]:
    """pid -> (group, label): the rollout actors, the learner, the driver, and Ray's own processes
    (the process trees of every node's raylet, GCS, dashboard and monitors)."""
    import psutil

    found: dict[int, tuple[str, str]] = {pid: ("actors", "rollout actors") for pid in actor_pids}
    found[learner_pid] = ("learner", "learner")
    found.setdefault(driver_pid, ("driver", "driver"))
    for node in nodes:
        for infos in node.all_processes.values():
            for info in infos:
                try:
                    root = psutil.Process(info.process.pid)
                    tree = [root] + root.children(recursive=True)
                except psutil.Error:
                    continue
                for proc in tree:
                    if proc.pid not in found:
                        found[proc.pid] = ("ray", process_label(proc))
    return found


@dataclasses.dataclass
class CpuWindow:
    """Cores (CPU-s per second of wall time) of each group, and of each of Ray's processes by label."""

    wall_s: float
    groups: dict[str, float]
    ray: dict[str, float]

    def __getitem__(self, group: str) -> float:
        return self.groups.get(group, 0.0)


def cpu_between(before: Snapshot, after: Snapshot, processes: dict[int, tuple[str, str]]) -> CpuWindow:
    wall = after.time - before.time
    groups: dict[str, float] = {"actors": 0.0, "learner": 0.0, "driver": 0.0, "ray": 0.0}
    ray_labels: dict[str, float] = {}
    for pid, (group, label) in processes.items():
        if pid in before.processes and pid in after.processes:
            used = (after.processes[pid] - before.processes[pid]) / wall
            groups[group] += used
            if group == "ray":
                ray_labels[label] = ray_labels.get(label, 0.0) + used
    groups["machine"] = (after.machine - before.machine) / wall
    groups["other"] = groups["machine"] - sum(groups[g] for g in ("actors", "learner", "driver", "ray"))
    return CpuWindow(wall, groups, ray_labels)


# ------------------------------------------------------------------------------------------
# One trainer, measured
# ------------------------------------------------------------------------------------------
class Runner:
    """Holds one PPO trainer; in this process (single node) or as a Ray actor (cluster)."""

    def __init__(self, config: dict[str, Any]) -> None:
        from algorithms import PPO

        self.trainer = PPO(config=config)

    def pid(self) -> int:
        return os.getpid()

    def train(self) -> int:
        return int(self.trainer.train()["env_steps_this_iter"])

    def run_for(self, seconds: float, pids: list[int]) -> dict[str, Any]:
        """Whole iterations for ``seconds``, timed from the end of an untimed one: env steps, wall time,
        time in learning, and CPU snapshots of ``pids`` at both ends of the timed part.

        The untimed iterations take the steps the actors sampled ahead while the caller was busy
        elsewhere (streams: until none is left over for a later batch), so the timed ones count
        only what was sampled while they ran."""
        self.trainer.train()
        for _ in range(10):
            if not self.trainer.workers.backlog_steps:
                break
            self.trainer.train()
        steps = iterations = 0
        learn_s = 0.0
        before = snapshot(pids)
        while time.perf_counter() - before.time < seconds:
            result = self.trainer.train()
            steps += result["env_steps_this_iter"]
            learn_s += result["learn_time_s"]
            iterations += 1
        after = snapshot(pids)
        self.trainer.workers.pause()  # streams: the actors rest from here (requests: a no-op)
        return {"steps": steps, "seconds": after.time - before.time, "iterations": iterations, "learn_s": learn_s,
                "before": before, "after": after}

    def stop(self) -> None:
        self.trainer.stop()


@dataclasses.dataclass
class Point:
    """One measured number of actors."""

    actors: int
    rate: float
    ideal: float
    mean_step: float
    start_s: float
    steps: int
    wall_s: float
    learn_s: float
    placement: str
    sampling: CpuWindow
    rest: CpuWindow

    @property
    def share(self) -> float:
        return self.rate / self.ideal


def alive_actors(exclude_pid: int) -> list[tuple[int, str, str]]:
    """(pid, class name, node id) of the live actors of this Ray cluster but the runner."""
    from ray._private import state

    out = []
    for info in state.actors().values():
        pid = int(info.get("Pid") or 0)
        if info.get("State") == "ALIVE" and pid and pid != exclude_pid:
            out.append((pid, str(info.get("ActorClassName")), str(info.get("Address", {}).get("NodeID", ""))))
    return out


def ppo_config(actors: int, args: argparse.Namespace, env: str, env_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "env": env,
        "env_config": env_config,
        "num_workers": actors,
        "num_envs_per_worker": 1,
        "sample_async": True,
        "max_requests_in_flight_per_worker": args.requests_per_actor or None,
        "train_batch_size": actors * args.batch_per_actor,
        "num_cpus_per_worker": 1,
        "num_cpus_for_learner": 1,
        "seed": 0,
    }


def measure_point(actors: int, multi_node: bool, nodes: list[Any], node_order: list[str], args: argparse.Namespace,
                  env: str, env_config: dict[str, Any], measure_step: Callable[[], float]) -> Point:
    """Start a trainer with ``actors`` rollout actors, warm it up, measure it sampling and at rest, stop it."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from algorithms import PPO

    config = ppo_config(actors, args, env, env_config)
    mean_step = measure_step()
    started = time.perf_counter()
    pg = remote = None
    if multi_node:
        bundles = PPO.default_resource_request(config)
        pg = placement_group(bundles, strategy="SPREAD")
        ray.get(pg.ready(), timeout=300)
        remote = ray.remote(Runner).options(
            num_cpus=bundles[0]["CPU"],
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True),
        ).remote(config)
        call: Callable[..., Any] = lambda name, *a: ray.get(getattr(remote, name).remote(*a))  # noqa: E731
    else:
        local = Runner(config)
        call = lambda name, *a: getattr(local, name)(*a)  # noqa: E731
    try:
        learner_pid = call("pid")
        call("train")  # starts the actors; their first fragments in
        found = alive_actors(learner_pid)
        for _ in range(MAX_WARMUP_ITERATIONS):
            if len(found) >= actors:
                break
            call("train")
            found = alive_actors(learner_pid)
        else:
            print(f"  warning: {len(found)} of {actors} rollout actors up after the warm-up", flush=True)
        start_s = time.perf_counter() - started
        per_node = {node: 0 for node in node_order}
        for _, _, node in found:
            per_node[node] = per_node.get(node, 0) + 1
        placement = "+".join(str(count) for count in per_node.values())

        processes = find_processes(nodes, [pid for pid, _, _ in found], learner_pid, os.getpid())
        run = call("run_for", args.seconds, list(processes))
        rate = run["steps"] / run["seconds"]
        sampling = cpu_between(run["before"], run["after"], processes)

        # The queued requests (fragments of every actor) finish before the actors are at rest.
        queued_s = max(1, args.requests_per_actor) * args.batch_per_actor * actors / max(rate, 1e-9)
        drain_s = min(DRAIN_MAX_S, max(DRAIN_MIN_S, 1.5 * queued_s + 1.0))
        time.sleep(drain_s)
        processes = find_processes(nodes, [pid for pid, _, _ in alive_actors(learner_pid)], learner_pid, os.getpid())
        before = snapshot(list(processes))
        time.sleep(args.idle_seconds)
        rest = cpu_between(before, snapshot(list(processes)), processes)
    finally:
        try:
            call("stop")
        finally:
            if remote is not None:
                ray.kill(remote)
            if pg is not None:
                remove_placement_group(pg)
    time.sleep(1.0)  # the killed actors' processes exit before the next point starts
    return Point(actors, rate, actors / mean_step, mean_step, start_s, int(run["steps"]), run["seconds"],
                 run["learn_s"], placement, sampling, rest)


def run_curve(multi_node: bool, args: argparse.Namespace, env: str, env_config: dict[str, Any],
              measure_step: Callable[[], float]) -> list[Point]:
    """Every N of ``--actors`` on one Ray (one node, or a 4-node cluster on this machine), started once."""
    import ray

    from algorithms import register_env

    most = max(args.actors)
    cluster = None
    from benchmarks.loopback import loopback_only

    loopback_only()  # the test cluster's nodes too: all of them on 127.0.0.1
    if multi_node:
        from ray.cluster_utils import Cluster

        per_node = math.ceil(most / NODES) + 1  # + 1: the learner's bundle, and slack for an uneven SPREAD
        node_args = {"num_cpus": per_node, "object_store_memory": 256 * 1024**2}
        cluster = Cluster(initialize_head=True, head_node_args={**node_args, "include_dashboard": False})
        for _ in range(NODES - 1):
            cluster.add_node(**node_args)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
        nodes = cluster.list_all_nodes()
    else:
        ray.init(num_cpus=most + 1, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
        nodes = [ray._private.worker._global_node]
    node_order = [node.node_id for node in nodes]
    if args.cpu_bound:
        register_env(BUSY_ENV, busy_env_creator)
    label = f"{NODES} nodes" if multi_node else "single node"
    points = []
    try:
        for actors in args.actors:
            point = measure_point(actors, multi_node, nodes, node_order, args, env, env_config, measure_step)
            points.append(point)
            print(f"  {label}, {actors:>2} actors: {point.rate:,.0f} env steps/s, {point.share:.0%} of ideal; "
                  f"machine CPU {point.sampling['machine']:.2f} cores sampling, {point.rest['machine']:.2f} at rest"
                  + (f"; actors per node {point.placement}" if multi_node else ""), flush=True)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    return points


# ------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------
def costs(point: Point) -> dict[str, float]:
    """Per actor at rest (CPU-ms/s), and CPU-ms per 1,000 env steps in the actors, the learner
    (with the driver) and Ray's processes, each net of its own at-rest use."""
    s, r = point.sampling, point.rest
    per_kstep = 1e6 * s.wall_s / max(point.steps, 1)  # cores x this = CPU-ms per 1,000 env steps
    learner = s["learner"] + s["driver"] - r["learner"] - r["driver"]
    return {
        "rest_ms": 1000 * r["actors"] / point.actors,
        "actor_ms": (s["actors"] - r["actors"]) * per_kstep,
        "learner_ms": learner * per_kstep,
        "ray_ms": (s["ray"] - r["ray"]) * per_kstep,
        "base_rest": r["learner"] + r["driver"] + r["ray"],
    }


def print_curve(title: str, points: list[Point], cores: int) -> None:
    print(f"\n{title}")
    print(f"{'actors':>6}  {'env steps/s':>11}  {'ideal':>7}  {'of ideal':>8}  {'step ms':>7}  {'start s':>7}  "
          f"{'learn':>5}  |  CPU while sampling, cores: {'machine':>12}  {'actors':>6}  {'learner':>7}  {'Ray':>5}  "
          f"{'other':>5}")
    for p in points:
        s = p.sampling
        print(f"{p.actors:>6}  {p.rate:>11,.0f}  {p.ideal:>7,.0f}  {p.share:>8.0%}  {p.mean_step * 1000:>7.2f}  "
              f"{p.start_s:>7.1f}  {p.learn_s / p.wall_s:>5.0%}  |  {'':>26} {s['machine']:>5.2f} "
              f"({s['machine'] / cores:>4.0%})  {s['actors']:>6.2f}  {s['learner'] + s['driver']:>7.2f}  "
              f"{s['ray']:>5.2f}  {s['other']:>5.2f}")
    print(f"\n{'actors':>6}  {'per actor at rest':>17}  {'CPU-ms per 1,000 env steps:':>27} {'actors':>6}  "
          f"{'learner':>7}  {'Ray':>5}  |  at rest, cores: {'machine':>7}  {'actors':>6}  {'Ray':>5}  {'other':>5}")
    print(f"{'':>6}  {'(CPU-ms per s)':>17}  {'':>27} {'':>6}  {'':>7}  {'':>5}  |")
    for p in points:
        c = costs(p)
        print(f"{p.actors:>6}  {c['rest_ms']:>17.1f}  {'':>27} {c['actor_ms']:>6.0f}  {c['learner_ms']:>7.0f}  "
              f"{c['ray_ms']:>5.0f}  |  {'':>16}{p.rest['machine']:>7.2f}  {p.rest['actors']:>6.2f}  "
              f"{p.rest['ray']:>5.2f}  {p.rest['other']:>5.2f}")
    busy = max(p.sampling["other"] for p in points)
    if busy > 0.1 * cores:
        print(f"(the machine was not ours alone: other processes took up to {busy:.2f} cores while sampling; "
              f"their share is the 'other' column)")
    if any(p.placement.count("+") for p in points):
        print("rollout actors per node (head first): " + ", ".join(f"{p.actors}: {p.placement}" for p in points))

    # Where the CPU goes at the largest N, Ray's processes one by one.
    big = max(points, key=lambda p: p.actors)
    labels = sorted(set(big.sampling.ray) | set(big.rest.ray), key=lambda k: -big.sampling.ray.get(k, 0.0))
    print(f"\nat {big.actors} actors, cores while sampling / at rest: machine {big.sampling['machine']:.2f} / "
          f"{big.rest['machine']:.2f}; rollout actors {big.sampling['actors']:.2f} / {big.rest['actors']:.2f}; "
          f"learner {big.sampling['learner'] + big.sampling['driver']:.2f} / "
          f"{big.rest['learner'] + big.rest['driver']:.2f}; "
          f"Ray {big.sampling['ray']:.2f} / {big.rest['ray']:.2f} (" + ", ".join(
              f"{k} {big.sampling.ray.get(k, 0.0):.2f} / {big.rest.ray.get(k, 0.0):.2f}" for k in labels
              if max(big.sampling.ray.get(k, 0.0), big.rest.ray.get(k, 0.0)) >= 0.005)
          + f"); other processes {big.sampling['other']:.2f} / {big.rest['other']:.2f}")

    # Saturation: each actor at the ideal rate adds its rest cost plus its steps' costs everywhere.
    unsaturated = [p for p in points if p.share >= 0.8]
    ref = max(unsaturated, key=lambda p: p.actors) if unsaturated else min(points, key=lambda p: p.actors)
    why = "the largest N at >= 80% of ideal" if unsaturated else "no N reached 80% of ideal: the smallest N"
    c = costs(ref)
    steps_per_s = 1.0 / ref.mean_step
    parts = {
        "at rest": c["rest_ms"] / 1000,
        "stepping (actors)": c["actor_ms"] / 1e6 * steps_per_s,
        "learning (learner)": c["learner_ms"] / 1e6 * steps_per_s,
        "Ray's processes": c["ray_ms"] / 1e6 * steps_per_s,
    }
    per_actor = sum(parts.values())
    saturates = (cores - c["base_rest"]) / per_actor if per_actor > 0 else math.inf
    print(f"\nfrom the figures at {ref.actors} actors ({why}): each actor at the ideal "
          f"{steps_per_s:,.0f} env steps/s costs {per_actor:.3f} cores (" + ", ".join(
              f"{k} {v:.3f}" for k, v in parts.items()) + f"), on top of {c['base_rest']:.2f} cores at rest "
          f"(learner and Ray); {cores} cores saturate at about {saturates:.0f} actors")


def print_comparison(single: list[Point], multi: list[Point]) -> None:
    print(f"\n{'actors':>6}  {'single node':>11}  {f'{NODES} nodes':>11}  {f'{NODES} nodes / single':>16}   "
          f"(env steps/s, % of ideal)")
    by_n = {p.actors: p for p in single}
    for p in multi:
        if p.actors in by_n:
            q = by_n[p.actors]
            print(f"{p.actors:>6}  {q.rate:>6,.0f} {q.share:>4.0%}  {p.rate:>6,.0f} {p.share:>4.0%}  "
                  f"{p.rate / q.rate:>15.2f}x")


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actors", default="1,2,4,8,16,32",
                        help="comma-separated numbers of rollout actors (default 1,2,4,8,16,32)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per point (default 10)")
    parser.add_argument("--idle-seconds", type=float, default=4.0,
                        help="seconds the actors' CPU is measured at rest, per point (default 4)")
    parser.add_argument("--fast-ms", type=float, default=3.0, help="a usual env step, ms (default 3)")
    parser.add_argument("--slow-ms", type=float, default=100.0, help="a slow env step, ms (default 100)")
    parser.add_argument("--slow-prob", type=float, default=0.03, help="probability of a slow step (default 0.03)")
    parser.add_argument("--batch-per-actor", type=int, default=256,
                        help="env steps each actor samples per iteration (default 256)")
    parser.add_argument("--requests-per-actor", type=int, default=0,
                        help="0: streams (the default); N: sample requests queued per actor "
                             "(max_requests_in_flight_per_worker=N)")
    parser.add_argument("--cluster", choices=CLUSTER_MODES, default="both",
                        help=f"single node, a {NODES}-node Cluster on this machine, or both (default)")
    parser.add_argument("--cpu-bound", action="store_true",
                        help="the env busy-waits its step time instead of sleeping (needs a real core per actor)")
    args = parser.parse_args(argv)
    try:
        args.actors = [int(v) for v in args.actors.split(",")]
    except ValueError:
        parser.error(f"--actors: expected comma-separated integers, got {args.actors!r}")
    if not args.actors or min(args.actors) < 1:
        parser.error(f"--actors: every number of actors must be >= 1, got {args.actors}")
    for flag, value in (("--seconds", args.seconds), ("--idle-seconds", args.idle_seconds)):
        if not value > 0:
            parser.error(f"{flag}: must be > 0, got {value:g}")
    for flag, value in (("--fast-ms", args.fast_ms), ("--slow-ms", args.slow_ms)):
        if not value >= 0:
            parser.error(f"{flag}: must be >= 0, got {value:g}")
    if not 0 <= args.slow_prob <= 1:
        parser.error(f"--slow-prob: must be in [0, 1], got {args.slow_prob:g}")
    if args.requests_per_actor < 0:
        parser.error(f"--requests-per-actor: must be >= 0, got {args.requests_per_actor}")
    if args.batch_per_actor < 1:
        parser.error(f"--batch-per-actor: must be >= 1, got {args.batch_per_actor}")
    if args.fast_ms == 0 and (args.slow_ms == 0 or args.slow_prob == 0):
        parser.error("--fast-ms: the mean step time must be > 0 (the ideal rate divides by it)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore")
    from algorithms.envs.builtin import ENV_ID, measure_mean_step

    env_config = {"fast_ms": args.fast_ms, "slow_ms": args.slow_ms, "slow_prob": args.slow_prob}
    env, measure = (BUSY_ENV, measure_busy_mean_step) if args.cpu_bound else (ENV_ID, measure_mean_step)
    measure_step = lambda: measure(env_config)  # noqa: E731
    mean_step = measure_step()
    cores = len(os.sched_getaffinity(0))
    nominal = (1 - args.slow_prob) * args.fast_ms + args.slow_prob * args.slow_ms
    mode = f"{args.requests_per_actor} request(s) queued per actor" if args.requests_per_actor else "streams"
    print(f"{'CPU-bound (busy loop)' if args.cpu_bound else 'sleeping'} SlowCartPole: step {args.fast_ms:g} ms or "
          f"{args.slow_ms:g} ms (p={args.slow_prob:g}), mean {nominal:.2f} ms nominal, {mean_step * 1000:.2f} ms "
          f"measured now; ideal = actors / the mean step measured before each point. PPO, 1 env per rollout "
          f"actor, sample_async, 1 CPU per actor told to Ray, {args.batch_per_actor} env steps per actor per "
          f"iteration, {mode}; {args.seconds:g} s measured per point "
          f"after the warm-up, {args.idle_seconds:g} s at rest; {cores} cores", flush=True)
    single = multi = None
    if args.cluster in ("single", "both"):
        single = run_curve(False, args, env, env_config, measure_step)
    if args.cluster in ("4-node", "both"):
        multi = run_curve(True, args, env, env_config, measure_step)
    if single:
        print_curve("single node: one PPO trainer in this process", single, cores)
    if multi:
        print_curve(f"{NODES}-node Cluster on this machine: the trainer in a Ray actor, its rollout actors in a "
                    f"SPREAD placement group", multi, cores)
    if single and multi:
        print_comparison(single, multi)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
