"""A finished sweep written straight into a store (no Ray): for tests of what reads it back."""

from __future__ import annotations

from pathlib import Path

from tuner.store import Store, default_database_url


def store_sweep(run_dir: Path, last: dict[str, float | None], *, metric: str = "score", mode: str = "max") -> None:
    """Sweep ``run_dir.name`` in ``run_dir/tuner.db``: one TERMINATED trial per entry of ``last``
    (trial_id -> the value of ``metric`` it reported; None: it never reported it), config
    ``{"x": its index}``, two results each, the last one holding that value."""
    with Store(default_database_url(run_dir)) as store:
        eid = store.get_or_create_experiment(run_dir.name, spec={"trainable": "train"}, metric=metric, mode=mode)
        for index, (trial_id, value) in enumerate(last.items()):
            store.add_trial(eid, trial_id, index, {"x": index}, "TERMINATED")
            results = []
            for iteration in (1, 2):
                result = {"training_iteration": iteration, "trial_id": trial_id}
                if value is not None:
                    result[metric] = value if iteration == 2 else 0.0
                results.append((trial_id, iteration, result))
            store.add_results(eid, results)
            store.update_trial(trial_id, last_result=results[-1][2])
