"""The packed PPO sweeps of tests/algorithms/ppo/test_packed.py, importable by the driver process
that test kills: ``python -m tests.algorithms.ppo.packed_sweeps STORAGE [DATABASE_URL]`` runs the
PBT sweep and holds it after its first exploit, until it is killed."""

from __future__ import annotations

import sys
import threading
from typing import Any

from schedulers import PopulationBasedTraining
from tuner import tune
from tuner.callback import Callback

#: A member's small task: 64 env steps an iteration, two epochs of two minibatches.
SMALL = {"env": "CartPole-v1", "num_envs_per_worker": 4, "train_batch_size": 64, "minibatch_size": 32,
         "num_epochs": 2, "hidden_sizes": [16]}
PBT_INTERVAL, PBT_ITERATIONS = 2, 6
#: The PBT sweep's name: of its own in a test session's PostgreSQL schema, which every sweep shares.
NAME = "packed_pbt"


def exploits_on_record(url: str) -> int:
    """How many exploits the sweep :data:`NAME` in the store at ``url`` holds (0 before its tables are made)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            # this sweep's only: a store shared by a test session holds other sweeps' exploits too
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM exploits JOIN experiments ON experiments.id = "
                                            "exploits.experiment_id WHERE experiments.name = :name"),
                                    {"name": NAME}).scalar_one())
    except (sa.exc.OperationalError, sa.exc.ProgrammingError):  # the store is not made yet
        return 0
    finally:
        engine.dispose()


class HoldOnceExploited(Callback):
    """Holds the driver at the first result after an exploit is on record in the store at ``url``:
    in a pack, a member that went on alone can report past the perturbation point before the
    members PBT paused are restarted with their exploits, so a hold at an iteration could land
    before any exploit is recorded."""

    def __init__(self, url: str) -> None:
        self.url = url

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        if exploits_on_record(self.url):
            threading.Event().wait()  # until the test kills this process


def pbt_sweep(storage: str, database_url: str | None = None, resume: bool = False,
              callbacks: list[Callback] | None = None) -> Any:
    """Four members in one pack under synchronous PBT (the bottom half exploits the top half at
    every perturbation point), checkpointed every iteration."""
    scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=PBT_INTERVAL,
                                        quantile_fraction=0.5, seed=0, synch=True,
                                        hyperparam_mutations={"lr": [1e-4, 3e-4, 1e-3, 3e-3]})
    return tune.run("PPO", config={**SMALL, "seed": 0, "lr": tune.grid_search([1e-4, 3e-4, 1e-3, 3e-3])},
                    scheduler=scheduler, stop={"training_iteration": PBT_ITERATIONS}, checkpoint_freq=1,
                    max_failures=2,  # an actor lost while Ray cleans up after the killed driver is retried
                    metric="episode_return_mean", mode="max", storage_path=storage, database_url=database_url,
                    name=NAME, verbose=0, resume=resume, callbacks=callbacks, pack_trials=4)


if __name__ == "__main__":
    storage, url = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    pbt_sweep(storage, url, callbacks=[HoldOnceExploited(url or f"sqlite:///{storage}/{NAME}/tuner.db")])
