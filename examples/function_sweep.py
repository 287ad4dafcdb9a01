"""A sweep of a small function trainable, stored in SQLite, then analysed.

Tunes SGD with momentum on a noisy ill-conditioned quadratic: 4 learning rates on a grid times
3 random momentum values, 30 iterations each.
"""

from __future__ import annotations

import time

import numpy as np

from tuner import tune


def sgd_quadratic(config):
    rng = np.random.default_rng(config["seed"])
    scales = np.array([1.0, 10.0, 100.0])
    x = np.ones(3)
    velocity = np.zeros(3)
    for _ in range(30):
        grad = scales * x + rng.normal(0, 0.01, size=3)
        velocity = config["momentum"] * velocity - config["lr"] * grad
        x = x + velocity
        loss = float(0.5 * np.sum(scales * x * x))
        tune.report({"loss": loss if np.isfinite(loss) else 1e30})


def main() -> None:
    name = f"function_sweep_{time.strftime('%Y%m%d_%H%M%S')}"
    analysis = tune.run(
        sgd_quadratic,
        config={
            "lr": tune.grid_search([0.001, 0.003, 0.01, 0.019]),
            "momentum": tune.uniform(0.0, 0.95),
            "seed": 0,
        },
        num_samples=3,
        metric="loss",
        mode="min",
        resources_per_trial={"cpu": 0.5},
        storage_path="./results",
        name=name,
        seed=0,
    )
    print(f"\nbest config: {analysis.best_config}")
    print(f"best loss:   {analysis.best_result['loss']:.3g}")
    print(f"results stored in {analysis.experiment_path}/tuner.db "
          f"({len(analysis.results_df)} rows); reload with tune.load({analysis.experiment_path!r})")


if __name__ == "__main__":
    main()
