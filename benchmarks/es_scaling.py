"""ES's and ARS's scaling with rollout actors: env steps/s of one trainer against its number of
actors (1, 2, 4, 8) on the sleeping simulator (the RLlib paper's ES result: near-linear in
actors, the perturbations' episodes being independent).

The simulator is ``tuner/SlowCartPole-v1`` (a step sleeps 3 ms, or 100 ms with probability 3 %):
N actors of one env each could reach N / (mean step) env steps/s, the ideal printed beside each
point, whatever the machine's cores (they sleep). Each iteration plays a population of
``--pairs`` (32) antithetic pairs (ES: ``episodes_per_batch`` 64; ARS: ``num_rollouts`` 32), episodes capped at 200
steps (``max_episode_steps``), shared out over the actors, then one update; a point is whole
iterations for ``--seconds`` after one untimed iteration (the actors' start). The population's
episodes are shared out evenly, so an actor that drew longer episodes (or more slow steps) keeps
the others waiting at the iteration's end: what the curve's distance to the ideal shows.

RLlib 2.x ships neither ES nor ARS (both left RLlib with its old API stack): the peers a user
would pick instead, EvoTorch's ES and SB3-contrib's ARS, race ours to a return in
``es_cartpole.py`` and ``ars_cartpole.py``; the RLlib paper's figure is ES on a cluster.

    python benchmarks/es_scaling.py                         # ES and ARS, 1, 2, 4, 8 actors
    python benchmarks/es_scaling.py --algos es --actors 1,2 --seconds 1 --pairs 2    # the smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.common import int_list, positive, ray_init  # noqa: E402 - after the path is set

ENV_CONFIG = {"fast_ms": 3.0, "slow_ms": 100.0, "slow_prob": 0.03, "max_episode_steps": 200}
ALGOS = ("ES", "ARS")


def population(algo: str, pairs: int) -> dict[str, int]:
    """The config keys of a population of ``pairs`` antithetic pairs."""
    return {"episodes_per_batch": 2 * pairs} if algo == "ES" else {"num_rollouts": pairs, "rollouts_used": pairs}


def measure(algo: str, actors: int, seconds: float, seed: int, pairs: int) -> float:
    """Env steps/s of ``algo`` with ``actors`` rollout actors over ``seconds`` of whole iterations."""
    from algorithms.core.names import trainer_class

    trainer = trainer_class(algo)(config={
        "env": "tuner/SlowCartPole-v1", "env_config": ENV_CONFIG, "seed": seed, "num_workers": actors,
        "num_cpus_per_worker": 0.5, "train_batch_size": 1, "noise_size": 1_000_000, **population(algo, pairs)})
    try:
        trainer.train()
        start, steps0 = time.perf_counter(), trainer.env_steps_total
        while time.perf_counter() - start < seconds:
            trainer.train()
        return (trainer.env_steps_total - steps0) / (time.perf_counter() - start)
    finally:
        trainer.stop()


def main(argv: list[str] | None = None) -> None:
    from algorithms.envs.builtin import measure_mean_step

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", default="es,ars")
    p.add_argument("--actors", default="1,2,4,8")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pairs", type=int, default=32, help="antithetic pairs per population (default 32)")
    args = p.parse_args(argv)
    algos = [a.upper() for a in args.algos.split(",")]
    bad = [a for a in algos if a not in ALGOS]
    if bad:
        p.error(f"--algos: unknown {bad}; allowed: es, ars")
    actors = int_list(p, "--actors", args.actors, minimum=1)
    positive(p, "--seconds", args.seconds)
    positive(p, "--pairs", args.pairs)
    warnings.filterwarnings("ignore")
    ray_init(16)  # declared CPUs: the actors sleep, the machine's cores are no limit to their number
    step_config = {k: v for k, v in ENV_CONFIG.items() if k != "max_episode_steps"}
    print(f"tuner/SlowCartPole-v1 {ENV_CONFIG}; env steps/s over {args.seconds:g} s per point")
    print(f"{'actors':>6} {'ideal':>7} " + " ".join(f"{a + ' steps/s':>13} {'of ideal':>8}" for a in algos))
    for n in actors:
        ideal = n / measure_mean_step(step_config)
        rates = {a: measure(a, n, args.seconds, args.seed, args.pairs) for a in algos}
        print(f"{n:>6} {ideal:>7.0f} " + " ".join(f"{rates[a]:>13.0f} {rates[a] / ideal:>8.0%}" for a in algos),
              flush=True)


if __name__ == "__main__":
    main()
