"""Rollout actors' sampling rate on CartPole-v1 next to the raw step rate of the same vector envs.

For 1 and 2 rollout actors (``--max-workers 16``: 1, 2, 4, 8, 16), each a Ray actor owning one
``gym.make_vec("CartPole-v1", num_envs=--envs)`` (gymnasium's native vectorised CartPole):

* ceiling: the same vector env in the same kind of actor, stepped with random actions
  (``envs.action_space.sample()``), nothing else;
* ours: ``RolloutWorker.sample()`` as the PPO trainer calls it: policy inference for all envs
  in one batched call per step, numpy buffers, episode stats, GAE, the flat batch;
* ours with torch inference: the same, the policy network run by torch instead of numpy views
  of its parameters (what the default would cost with torch in the loop).

"env steps" counts every ``step()`` of every env (for ours too, the NEXT_STEP reset steps
included), so both sides do the same environment work. Per actor: steps / seconds inside the
actor. Total: all actors' steps / wall seconds seen by the driver. Rounds alternate between the
three so that load from other processes hits all alike; the median round is shown.

    python benchmarks/sampling.py                  # 1 and 2 actors
    python benchmarks/sampling.py --max-workers 16
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class RawStepper:
    """The ceiling: a vector env stepped with random actions."""

    def __init__(self, num_envs: int, seed: int) -> None:
        import gymnasium as gym

        self.envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")
        self.envs.reset(seed=seed)
        self.envs.action_space.seed(seed)
        self.num_envs = num_envs

    def run(self, num_steps: int) -> tuple[int, float]:
        envs = self.envs
        start = time.perf_counter()
        for _ in range(num_steps):
            envs.step(envs.action_space.sample())
        return num_steps * self.num_envs, time.perf_counter() - start


def _worker_kwargs(num_envs: int, seed: int, inference: str) -> dict:
    """A rollout worker as the PPO trainer makes it: numpy inference (torch never imported), or
    the torch network's forward pass."""
    import gymnasium as gym

    from algorithms.ppo.fast.numpy_policy import make_numpy_actor_critic
    from algorithms.ppo import PPO
    from algorithms.ppo.model import make_actor_critic

    config = PPO.resolve_config({"env": "CartPole-v1"})
    kwargs = {"obs_dim": 4, "action_space": gym.spaces.Discrete(2), "hidden_sizes": config["hidden_sizes"],
              "activation": config["activation"]}
    if inference == "numpy":
        factory = make_numpy_actor_critic
    else:
        factory, kwargs = make_actor_critic, {**kwargs, "inference": "torch"}
    return {"env": "CartPole-v1", "env_config": {}, "num_envs": num_envs, "policy_factory": factory,
            "policy_kwargs": kwargs, "seed": seed}


def _weights() -> dict:
    import gymnasium as gym
    import torch

    from algorithms.ppo.model import make_actor_critic

    policy = make_actor_critic(4, gym.spaces.Discrete(2), [64, 64], "tanh")
    policy.reset_parameters(torch.Generator().manual_seed(0))
    return policy.get_weights()


def measure(kind: str, actors: list, num_steps: int, num_envs: int, weights_ref) -> tuple[float, float]:
    """(median per-actor env steps/s, total env steps/s) of one round."""
    start = time.perf_counter()
    if kind == "ceiling":
        outs = ray.get([a.run.remote(num_steps) for a in actors])
        per_actor = [steps / seconds for steps, seconds in outs]
        total_steps = sum(steps for steps, _ in outs)
    else:
        outs = ray.get([a.sample.remote(num_steps, 1, [weights_ref]) for a in actors])
        per_actor = [b.slots / b.sample_time_s for b in outs]
        total_steps = sum(b.slots for b in outs)
    wall = time.perf_counter() - start
    return statistics.median(per_actor), total_steps / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=None, help="envs per actor (default: PPO's num_envs_per_worker)")
    parser.add_argument("--steps", type=int, default=1000, help="vector steps per actor per round (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per setting; the median is shown (default 5)")
    parser.add_argument("--max-workers", type=int, default=2, help="largest number of actors (default 2)")
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore")
    from algorithms.ppo import PPO
    from algorithms.sampling.rollout_actors import RemoteRolloutWorker as _RemoteRolloutWorker

    num_envs = args.envs or PPO.default_config()["num_envs_per_worker"]
    cpus = os.cpu_count() or 1
    from benchmarks.loopback import loopback_only

    loopback_only()
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    weights_ref = ray.put(_weights())
    remote_stepper = ray.remote(RawStepper)
    counts = [k for k in (1, 2, 4, 8, 16) if k <= max(1, args.max_workers)]

    print(f"CartPole-v1, {num_envs} envs per actor (gymnasium's native vector env), {args.steps} vector steps "
          f"per actor per round, median of {args.rounds} rounds; {cpus} CPUs; env steps/s")
    header = f"{'actors':>6}  {'':<28}{'per actor':>12}{'vs ceiling':>12}{'total':>12}{'vs ceiling':>12}"
    print(header)
    print("-" * len(header), flush=True)
    for k in counts:
        cpu_each = cpus / (3 * k)  # the three groups all exist at once; only one samples at a time
        ceiling = [remote_stepper.options(num_cpus=cpu_each).remote(num_envs, i) for i in range(k)]
        ours = {
            inference: [
                _RemoteRolloutWorker.options(num_cpus=cpu_each).remote(
                    **_worker_kwargs(num_envs, i, inference), worker_index=i + 1
                )
                for i in range(k)
            ]
            for inference in ("numpy", "torch")
        }
        groups = {"ceiling": ceiling, "numpy": ours["numpy"], "torch": ours["torch"]}
        for name, actors in groups.items():  # warm up: start processes, load weights
            measure("ceiling" if name == "ceiling" else "ours", actors, 20, num_envs, weights_ref)
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in groups}
        for _ in range(args.rounds):
            for name, actors in groups.items():
                rounds[name].append(measure("ceiling" if name == "ceiling" else "ours", actors, args.steps, num_envs,
                                            weights_ref))
        med = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
               for name, rs in rounds.items()}
        labels = {"ceiling": "ceiling: random actions", "numpy": "ours (default)", "torch": "ours, torch inference"}
        for name in groups:
            per_actor, total = med[name]
            ratio = "" if name == "ceiling" else f"{per_actor / med['ceiling'][0]:.2f}x"
            total_ratio = "" if name == "ceiling" else f"{total / med['ceiling'][1]:.2f}x"
            print(f"{k:>6}  {labels[name]:<28}{per_actor:>12,.0f}{ratio:>12}{total:>12,.0f}{total_ratio:>12}", flush=True)
        for actors in groups.values():
            for actor in actors:
                ray.kill(actor)
    print("\nvs ceiling: our rate / the raw vector env's rate (target: per actor >= 0.5x). Total includes the "
          "driver's round trip: all actors' steps / wall time from the requests to the last fragment.")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
