"""ARS on CartPole-v1: env steps, env steps per second and wall time until a population's mean
return reaches a target, ours next to Stable-Baselines3-contrib's ARS (the ARS an SB3 user runs;
RLlib 2.x ships none) in the same run (issue 47: each new trainer as fast as the peer a user
would pick).

The same work in both, SB3-contrib's defaults given to ours under its keys: a linear policy with a
bias, 8 directions a population (``num_rollouts`` / ``n_delta``) played as antithetic pairs of one
episode each, all 8 used (``rollouts_used`` / ``n_top``), ``noise_stdev`` / ``delta_std`` 0.05,
``sgd_stepsize`` / ``learning_rate`` 0.02, the step scaled by the used returns' std (ARS V1-t);
observations normalised by a running mean and std merged from every worker (ours: MeanStdFilter;
SB3: ``VecNormalize`` synced by ``AsyncEval``: ARS V2); the episodes played by ``--workers`` (2)
processes (ours: rollout actors; SB3: ``AsyncEval``'s subprocesses). The rule: the mean return of
one population's 16 episodes (ours: ``metrics_num_episodes_for_smoothing`` 16; SB3: its episode
buffer, emptied every population) >= the target. What differs is each system's own: ours' shared
noise table and Ray actors, SB3's fresh Gaussian directions sent to its pipes; SB3 starts from zero
weights, ours from small random ones. Seeds interleaved (ours, SB3, ours, ...) after an untimed
warm-up of each; wall time from before the trainer is built (Ray already up).

    python benchmarks/ars_cartpole.py                     # ours and SB3-contrib, 3 seeds
    python benchmarks/ars_cartpole.py --systems ours --quick     # the smoke test
"""

from __future__ import annotations

import functools
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import positive, ray_init  # noqa: E402 - after the path is set
from benchmarks.peers.to_target import parse_race, print_table, race_parser, race_seeds, race_to_target  # noqa: E402

DIRECTIONS, NOISE, STEP = 8, 0.05, 0.02


def run_ours(seed: int, target: float, max_steps: int, workers: int) -> dict[str, Any]:
    from algorithms import ARS

    start = time.perf_counter()
    trainer = ARS(config={
        "env": "CartPole-v1", "seed": seed, "num_workers": workers, "num_cpus_per_worker": 1,
        "num_cpus_for_learner": 1, "hidden_sizes": [], "num_rollouts": DIRECTIONS, "rollouts_used": DIRECTIONS,
        "noise_stdev": NOISE, "sgd_stepsize": STEP, "train_batch_size": 1,  # an iteration: one population
        "metrics_num_episodes_for_smoothing": 2 * DIRECTIONS})
    try:
        return race_to_target(trainer.train, lambda r: (r["env_steps_total"], r["episode_return_mean"]), start,
                              target, max_steps)
    finally:
        trainer.stop()


class _Solved(Exception):
    """Raised by the callback to end SB3's ``learn`` once the rule holds."""


def run_sb3(seed: int, target: float, max_steps: int, workers: int) -> dict[str, Any]:
    import gymnasium as gym
    import numpy as np
    from sb3_contrib import ARS
    from sb3_contrib.common.vec_env import AsyncEval
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    def make_env() -> Any:
        return VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]), norm_obs=True, norm_reward=False)

    progress: dict[str, Any] = {"first": None, "solved": None}

    class Rule(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            steps = self.model.num_timesteps
            if progress["first"] is None:
                progress["first"] = (steps, time.perf_counter())
            returns = [info["r"] for info in self.model.ep_info_buffer]
            if returns and float(np.mean(returns)) >= target:
                progress["solved"] = (steps, time.perf_counter())
                raise _Solved

    start = time.perf_counter()
    model = ARS("MlpPolicy", make_env(), n_delta=DIRECTIONS, n_top=DIRECTIONS, learning_rate=STEP,
                delta_std=NOISE, policy_kwargs={"net_arch": [], "with_bias": True}, seed=seed, device="cpu")
    async_eval = AsyncEval([make_env for _ in range(workers)], model.policy)
    async_eval.seed(seed)
    try:
        model.learn(total_timesteps=max_steps, callback=Rule(), async_eval=async_eval, log_interval=None)
    except _Solved:
        async_eval.close()
    first = progress["first"]
    if progress["solved"]:
        steps, at = progress["solved"]
        return {"steps": steps, "wall": at - start, "rate": (steps - first[0]) / max(at - first[1], 1e-9)}
    rate = (model.num_timesteps - first[0]) / max(time.perf_counter() - first[1], 1e-9) if first else math.nan
    return {"steps": None, "wall": None, "rate": rate, "cap": model.num_timesteps}


SYSTEMS = {"ours": run_ours, "sb3": run_sb3}


def main(argv: list[str] | None = None) -> None:
    p = race_parser(__doc__.splitlines()[0], list(SYSTEMS), target=475.0, max_steps=200_000)
    p.add_argument("--workers", type=int, default=2)
    args, systems, seeds = parse_race(p, argv, list(SYSTEMS))
    positive(p, "--workers", args.workers)
    max_steps = 2_000 if args.quick else args.max_steps
    warnings.filterwarnings("ignore")
    if "ours" in systems:
        ray_init(args.workers + 1)
    print(f"CartPole-v1, rule: a population's {2 * DIRECTIONS} episodes' mean >= {args.target:g} within "
          f"{max_steps:,} env steps; {args.workers} workers; seeds {seeds}")
    runs_of = {s: functools.partial(SYSTEMS[s], workers=args.workers) for s in systems}
    runs = race_seeds("ARS", runs_of, seeds, args.target, max_steps, None if args.quick else 2_000)
    print_table("ARS (SB3-contrib's)", runs, peer="sb3")


if __name__ == "__main__":
    main()
