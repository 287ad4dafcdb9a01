"""Optuna's TPE proposes configurations, ASHA stops the poor ones early."""

import sys

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner
from schedulers import ASHAScheduler
from tuner.search.optuna import OptunaSearch


def objective(config):
    for step in range(1, 11):
        loss = (0.1 + abs(config["width"] - 7) / 10) * (1 + 10 / step) + (config["activation"] == "tanh")
        tune.report({"mean_loss": loss, "iterations": step})


if __name__ == "__main__":
    tuner = Tuner(
        tune.with_resources(objective, {"cpu": 0.5}),
        param_space={
            "width": tune.uniform(0, 20),
            "activation": tune.choice(["relu", "tanh"]),
        },
        tune_config=TuneConfig(
            metric="mean_loss",
            mode="min",
            search_alg=OptunaSearch(seed=3),
            scheduler=ASHAScheduler(max_t=10, grace_period=2, reduction_factor=2),
            num_samples=10,
            max_concurrent_trials=4,
        ),
        run_config=RunConfig(name="asha_optuna", storage_path=sys.argv[1]),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print("best config:", best.config, "mean_loss:", best.metrics["mean_loss"])
    df = results.get_dataframe()
    print(df[["mean_loss", "training_iteration", "config/width", "config/activation"]])
    assert len(results) == 10 and not results.errors
