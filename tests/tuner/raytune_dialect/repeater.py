"""Each configuration Optuna proposes runs three times, seeded by its repeat index; Optuna learns from the mean."""

import random
import sys

from tuner import tune
from tuner.tune import RunConfig, TuneConfig, Tuner
from tuner.search import Repeater
from tuner.search.optuna import OptunaSearch


def objective(config):
    noise = random.Random(config["__trial_index__"]).gauss(0.0, 0.1)  # the same three seeds for every config
    for step in range(1, 6):
        tune.report({"loss": (config["x"] - 2.0) ** 2 + noise + 1.0 / step})


if __name__ == "__main__":
    tuner = Tuner(
        tune.with_resources(objective, {"cpu": 0.5}),
        param_space={"x": tune.uniform(0, 4)},
        tune_config=TuneConfig(
            metric="loss",
            mode="min",
            search_alg=Repeater(OptunaSearch(seed=3), repeat=3),
            num_samples=12,  # trials, repeats included: 4 configurations, 3 runs each
            max_concurrent_trials=3,
        ),
        run_config=RunConfig(name="repeater", storage_path=sys.argv[1]),
    )
    results = tuner.fit()
    df = results.get_dataframe()
    print(df[["loss", "config/x", "config/__trial_index__"]])
    assert len(results) == 12 and not results.errors
    groups = df.groupby("config/x")["config/__trial_index__"]
    assert len(groups) == 4 and all(sorted(indices) == [0, 1, 2] for _, indices in groups)
