"""A2C on CartPole through ``tune.run``: a small grid over the learning rate, each trial with two
rollout actors of 8 envs. The trainer is ``algorithms/a2c/trainer.py``: also the shortest example
of an algorithm written on the trainers' base (``DistributedTrainer``: its keys, fragments to a
batch, the update; the base gives it rollout actors, the model contract, a GPU learner, metrics
and checkpoints).

    python examples/a2c.py
"""

from __future__ import annotations

from typing import Any


def main(storage_path: str = "results", max_env_steps: int = 100_000) -> Any:
    from tuner import tune

    return tune.run(
        "A2C",
        config={"env": "CartPole-v1", "lr": tune.grid_search([7e-4, 2e-3]), "seed": 0, "num_workers": 2},
        stop={"env_steps_total": max_env_steps}, metric="episode_return_mean", mode="max",
        storage_path=storage_path, name="a2c_cartpole", verbose=1,
    )


if __name__ == "__main__":
    analysis = main()
    print("best config:", analysis.best_config, "return:", analysis.best_result["episode_return_mean"])
