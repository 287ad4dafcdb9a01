"""``num_workers="auto"``: where a trainer samples, decided from a short timing of its env.

Three layouts, and the workload that wants each:

* **in-process** (``num_workers=0``): the learner steps ``num_envs_per_worker`` envs as one vector
  env between its updates. Right for a fast, even env (CartPole steps in microseconds): shipping a
  fragment to another process costs more than sampling it, and nothing waits on a slow step.
* **env threads** (``env_threads=True``, streaming actors of several envs each): right for a
  simulator whose step mostly waits (a remote or sleeping simulator: CPU time per step far below
  its wall time). Each env steps in a thread of its own, so a slow step delays only its own env,
  and one process holds several envs: fewer processes to start and to share the cores with.
* **rollout actors, one env each** (``num_workers=N``, ``sample_async=True``): right for a slow or
  uneven env that computes (a CPU-bound simulator): a process per env, each stepping without pause.

The rule: time one env for a moment (``TIMING_S``, random actions); in-process if a train batch
samples in less than ``IN_PROCESS_BELOW_S`` in one process and the step time is even (its 95th
percentile within ``EVEN_WITHIN`` times its median, or below ``UNEVEN_ABOVE_S``: a shorter tail is
the machine's scheduling, not the env). Otherwise, when the env used less than ``WAITS_BELOW`` of
a CPU while stepped (it waits) and the trainer streams (an on-policy trainer, the keys the user
gave allowing it): env threads, as few actors as keep each one's CPU use within
``THREADED_CPUS`` (one process's threads share one interpreter lock), each asking for the CPU its
envs used while timed. Else one actor per env (``num_envs_per_worker`` of them), each asking for
the CPU the env used (at least ``MIN_CPUS_PER_ACTOR``) unless ``num_cpus_per_worker`` is given, as
many as the cluster's CPUs hold beside the learner. Keys the user gave are never changed.

It is decided in the driver before the trial's placement group is made (the group's bundles
depend on it), as part of the trial's resolved config, which the trial takes with it
(``DistributedTrainer.prepare_trial``); a trainer outside a sweep times the env itself. Timings
are cached per process, one per env and env config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from typing import Any, Mapping

import numpy as np

TIMING_S = 0.3
MAX_TIMING_STEPS = 200
IN_PROCESS_BELOW_S = 0.5
EVEN_WITHIN = 3.0
UNEVEN_ABOVE_S = 1e-3  # a tail shorter than this is scheduling noise, not a slow simulator
MIN_CPUS_PER_ACTOR = 0.05
WAITS_BELOW = 0.5  # an env that used less of a CPU than this while stepped mostly waits
THREADED_CPUS = 0.5  # the CPU an actor's env threads may use together (they share one interpreter lock)

_timings: dict[str, "EnvTiming"] = {}


@dataclasses.dataclass(frozen=True)
class EnvTiming:
    """One env's step time: mean, median and 95th percentile (seconds), and the share of a CPU
    its steps used (1: CPU-bound; near 0: waiting, as a remote or sleeping simulator does)."""

    mean_s: float
    median_s: float
    p95_s: float
    cpu_share: float
    steps: int


def time_env(env: Any, env_config: Mapping[str, Any]) -> EnvTiming:
    """Step one env with random actions for about ``TIMING_S`` (at least 5 steps)."""
    from algorithms.envs.registry import make_vector_env, resolve_env

    envs = make_vector_env(resolve_env(env), env_config, 1)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        durations: list[float] = []
        cpu_began, began = time.process_time(), time.perf_counter()
        while len(durations) < MAX_TIMING_STEPS and (len(durations) < 5 or time.perf_counter() - began < TIMING_S):
            action = envs.action_space.sample()
            queued = _run_queue_s()
            step_began = time.perf_counter()
            envs.step(action)
            took = time.perf_counter() - step_began
            # the time this thread waited for a CPU held by other processes is the machine's load,
            # not the env's: on a busy machine it would make a fast env look uneven
            durations.append(max(took - (_run_queue_s() - queued), 0.0))
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    finally:
        envs.close()
    steps = np.asarray(durations)
    return EnvTiming(mean_s=float(steps.mean()), median_s=float(np.median(steps)),
                     p95_s=float(np.percentile(steps, 95)), cpu_share=min(1.0, cpu / max(wall, 1e-9)),
                     steps=len(durations))


def _run_queue_s() -> float:
    """Seconds this thread has waited, runnable, for a CPU (Linux's schedstat); 0 elsewhere."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def choose(timing: EnvTiming, config: Mapping[str, Any], given: Mapping[str, Any], cluster_cpus: float,
           *, threads_allowed: bool = False) -> dict[str, Any]:
    """The layout keys (``num_workers`` and, for rollout actors, ``num_envs_per_worker``,
    ``sample_async``, ``num_cpus_per_worker``, ``env_threads``) for an env timed as ``timing``, and
    ``reason``: one line on why. ``num_envs_per_worker`` is the trial's number of envs here:
    in-process they form one vector env, otherwise they are spread over the actors.
    ``threads_allowed``: the trainer streams on-policy (env threads are open to it)."""
    batch_s = config["train_batch_size"] * timing.mean_s
    even = timing.p95_s <= max(EVEN_WITHIN * timing.median_s, UNEVEN_ABOVE_S)
    measured = f"env step {timing.mean_s * 1e3:.3g} ms mean, {timing.p95_s * 1e3:.3g} ms p95"
    if batch_s < IN_PROCESS_BELOW_S and even:
        return {"num_workers": 0, "reason": f"{measured}: a train batch samples in {batch_s:.2g} s in the learner"}
    envs = int(config["num_envs_per_worker"])
    why = f"{measured} ({'uneven' if not even else 'slow'}: a train batch would take {batch_s:.2g} s in one process)"
    threads_allowed = threads_allowed and given.get("env_threads") is not False and \
        given.get("sample_async", True) is True and given.get("max_requests_in_flight_per_worker") is None
    if threads_allowed and timing.cpu_share < WAITS_BELOW and envs > 1:
        return _threaded(timing, envs, given, why)
    cpus = given.get("num_cpus_per_worker")
    if cpus is None:
        cpus = _cpus(timing.cpu_share)
    room = max(cluster_cpus - float(config["num_cpus_for_learner"]), 0.0)
    actors = max(1, min(envs, int(room / cpus + 1e-9) if cpus > 0 else envs))
    return {
        "num_workers": actors,
        "num_envs_per_worker": 1,
        "sample_async": given.get("sample_async", True),
        "num_cpus_per_worker": cpus,
        "reason": f"{why}: {plural(actors, 'rollout actor')} of 1 env, {cpus:g} CPU each",
    }


def _threaded(timing: EnvTiming, envs: int, given: Mapping[str, Any], why: str) -> dict[str, Any]:
    """Env threads: the fewest actors (a divisor of ``envs``) whose envs together use at most
    ``THREADED_CPUS`` of a CPU each."""
    per_actor = next(k for k in range(envs, 0, -1) if envs % k == 0 and
                     (k * timing.cpu_share <= THREADED_CPUS or k == 1))
    actors = envs // per_actor
    cpus = given.get("num_cpus_per_worker")
    if cpus is None:
        cpus = _cpus(per_actor * timing.cpu_share)
    return {
        "num_workers": actors,
        "num_envs_per_worker": per_actor,
        "sample_async": True,
        "env_threads": True,
        "num_cpus_per_worker": cpus,
        "reason": f"{why}, and it waits: {timing.cpu_share:.0%} of its step on the CPU: {plural(actors, 'rollout actor')} "
                  f"of {plural(per_actor, 'env')}, each env in a thread of its own, {cpus:g} CPU each",
    }


def _cpus(share: float) -> float:
    """The CPU an actor asks for: what its envs used, in twentieths, at least ``MIN_CPUS_PER_ACTOR``."""
    return max(MIN_CPUS_PER_ACTOR, math.ceil(share * 20 - 1e-9) / 20)


def plural(count: int, noun: str) -> str:
    """``1 env``, ``8 envs``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _key(config: Mapping[str, Any]) -> str:
    """The env and env config, hashed."""
    env = config["env"]
    name = env if isinstance(env, str) else f"{getattr(env, '__module__', '')}.{getattr(env, '__qualname__', env)}"
    parts: list[Any] = [name, sorted((str(k), repr(v)) for k, v in dict(config["env_config"]).items()),
                        repr(config.get("preprocessing"))]
    return hashlib.sha1(json.dumps(parts, default=repr).encode()).hexdigest()


def resolve(config: dict[str, Any], given: Mapping[str, Any], *, threads_allowed: bool = False) -> str:
    """Replace ``num_workers="auto"`` in ``config`` by a layout (see the module's doc); returns the
    reason. ``threads_allowed``: the trainer may stream with env threads (on-policy)."""
    import ray

    timing_key = _key(config)
    timing = _timings.get(timing_key)
    if timing is None:
        from algorithms.envs.registry import trial_env

        # the env as the trial builds it: preprocessing (Atari's frame skip) changes its step time
        env = trial_env(config["env"], config["env_config"], config.get("preprocessing"))
        timing = _timings[timing_key] = time_env(env, config["env_config"])
    cpus = float(ray.cluster_resources().get("CPU", 1.0)) if ray.is_initialized() else 1.0
    decision = choose(timing, config, given, cpus, threads_allowed=threads_allowed)
    config.update({name: value for name, value in decision.items() if name != "reason"})
    return str(decision["reason"])
