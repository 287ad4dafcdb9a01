"""OpenAI-ES on CartPole-v1: env steps, env steps per second and wall time until a population's mean
return reaches a target, ours next to EvoTorch's (its PGPE with a fixed sigma, centred ranks and
Adam on the centre: OpenAI-ES; RLlib 2.x ships no ES), in the same run (issue 47: each new trainer
as fast as the peer a user would pick).

The same work in both: a 16-unit tanh MLP, a population of 32 episodes (16 antithetic pairs of one
episode each), sigma 0.02, Adam with step 0.01 on the centred ranks' gradient (no L2: EvoTorch has
none), observations normalised by a running mean and std merged from every worker, the episodes
played by ``--workers`` (2) Ray actors (ours: the trial's rollout actors; EvoTorch: ``GymNE``'s
``num_actors``). The rule: the mean return of one population's 32 episodes (ours:
``metrics_num_episodes_for_smoothing`` 32; EvoTorch: ``mean_eval``) >= the target. What differs is
each system's own: ours' shared noise table, EvoTorch's directions drawn in the driver and sent to
its actors with the population's parameters; EvoTorch's centre starts near zero, ours small and
random. Seeds interleaved (ours, EvoTorch, ours, ...) after an untimed warm-up of each; wall time
from before the trainer (EvoTorch: its problem and searcher) is built, Ray already up.

    python benchmarks/es_cartpole.py                      # ours and EvoTorch, 3 seeds
    python benchmarks/es_cartpole.py --systems ours --quick     # the smoke test
"""

from __future__ import annotations

import functools
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import positive, ray_init  # noqa: E402 - after the path is set
from benchmarks.peers.to_target import parse_race, print_table, race_parser, race_seeds, race_to_target  # noqa: E402

POPULATION, SIGMA, STEP, HIDDEN = 32, 0.02, 0.01, 16


def run_ours(seed: int, target: float, max_steps: int, workers: int) -> dict[str, Any]:
    from algorithms import ES

    start = time.perf_counter()
    trainer = ES(config={
        "env": "CartPole-v1", "seed": seed, "num_workers": workers, "num_cpus_per_worker": 1,
        "num_cpus_for_learner": 1, "hidden_sizes": [HIDDEN], "activation": "tanh", "episodes_per_batch": POPULATION,
        "noise_stdev": SIGMA, "stepsize": STEP, "l2_coeff": 0.0, "train_batch_size": 1,  # an iteration: one population
        "metrics_num_episodes_for_smoothing": POPULATION})
    try:
        return race_to_target(trainer.train, lambda r: (r["env_steps_total"], r["episode_return_mean"]), start,
                              target, max_steps)
    finally:
        trainer.stop()


def run_evotorch(seed: int, target: float, max_steps: int, workers: int) -> dict[str, Any]:
    import torch
    from evotorch.algorithms import PGPE
    from evotorch.neuroevolution import GymNE

    torch.manual_seed(seed)  # GymNE takes no seed: its directions and env seeds come from the global generators
    start = time.perf_counter()
    problem = GymNE(env="CartPole-v1", network=f"Linear(obs_length, {HIDDEN}) >> Tanh() >> Linear({HIDDEN}, act_length)",
                    observation_normalization=True, num_episodes=1, num_actors=workers)
    searcher = PGPE(problem, popsize=POPULATION, center_learning_rate=STEP, stdev_learning_rate=0.0,
                    stdev_init=SIGMA, optimizer="adam", ranking_method="centered", symmetric=True)
    try:
        def train() -> dict[str, Any]:
            searcher.step()
            return dict(searcher.status)

        return race_to_target(train, lambda s: (int(s["total_interaction_count"]), float(s["mean_eval"])), start,
                              target, max_steps)
    finally:
        problem.kill_actors()


SYSTEMS = {"ours": run_ours, "evotorch": run_evotorch}


def main(argv: list[str] | None = None) -> None:
    p = race_parser(__doc__.splitlines()[0], list(SYSTEMS), target=475.0, max_steps=500_000)
    p.add_argument("--workers", type=int, default=2)
    args, systems, seeds = parse_race(p, argv, list(SYSTEMS))
    positive(p, "--workers", args.workers)
    max_steps = 2_000 if args.quick else args.max_steps
    warnings.filterwarnings("ignore")
    ray_init(2 * args.workers + 2)  # room for both systems' actors
    print(f"CartPole-v1, rule: a population's {POPULATION} episodes' mean >= {args.target:g} within "
          f"{max_steps:,} env steps; {args.workers} workers; seeds {seeds}")
    runs_of = {s: functools.partial(SYSTEMS[s], workers=args.workers) for s in systems}
    runs = race_seeds("ES", runs_of, seeds, args.target, max_steps, None if args.quick else 2_000, width=8)
    print_table("OpenAI-ES (EvoTorch's PGPE, sigma fixed)", runs, peer="evotorch")


if __name__ == "__main__":
    main()
