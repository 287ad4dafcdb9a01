"""The controller applies a ResourceChangingScheduler's changes: in place for an elastic trainable
(extension groups placed only when free, handed to the trainable, given back when it ends), by a
restart from a checkpoint for any other (Ray Tune's way). On the in-process backend: no Ray."""

from __future__ import annotations

from typing import Any

import pytest

from schedulers import DistributeResources, FIFOScheduler, ResourceChangingScheduler
from tests.tuner.execution.fake_backend import FakeBackend
from tests.tuner.execution.test_controller_decisions import Climb, no_ray  # noqa: F401 - the fixture
from tuner.api import _resources_for
from tuner.execution.controller import Controller
from tuner.run_options import RunOptions
from tuner.search.basic_variant import BasicVariantGenerator
from tuner.search.space import grid_search
from tuner.stopper import to_stopper
from tuner.store import Store


class Lengths(Climb):
    """Climb that ends at iteration ``length`` and reports the CPUs it runs with."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        result["cpus"] = self.cpus()
        result["done"] = self.iteration + 1 >= self.config["length"]
        return result

    def cpus(self) -> float:
        return float(self.trial_resources.required_resources.get("CPU", 0.0))


class Elastic(Lengths):
    """Takes any extra bundles in place, and says which groups it was given."""

    supports_elastic_resources = True

    @classmethod
    def accepts_resources(cls, config, bundles, prepared=None) -> bool:
        return True

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self.bundles = [{"CPU": 1.0}]
        self.groups: list[Any] = []

    def update_resources(self, new_resources, placement_groups=()) -> bool:
        self.bundles, self.groups = list(new_resources), list(placement_groups)
        return True

    def cpus(self) -> float:
        return sum(b.get("CPU", 0.0) for b in self.bundles)


def run(tmp_path, trainable: type, backend: FakeBackend, profiler: Any = None, profiles: dict | None = None):
    scheduler = ResourceChangingScheduler(FIFOScheduler(), DistributeResources(add_bundles=True))
    space = {"rate": 1.0, "length": grid_search([2, 2, 2, 8])}
    assert scheduler.set_search_properties("score", "max", config=space)
    searcher = BasicVariantGenerator()
    assert searcher.set_search_properties("score", "max", space, num_samples=1, seed=0)
    with Store(f"sqlite:///{tmp_path / 'tuner.db'}") as store:
        experiment_id = store.get_or_create_experiment("rc", spec={}, metric="score", mode="max")
        controller = Controller(
            trainable_cls=trainable, experiment_id=experiment_id, experiment_name="rc", run_dir=str(tmp_path / "rc"),
            store=store, searcher=searcher, scheduler=scheduler, stopper=to_stopper(None),
            resources_for=_resources_for(trainable, None), options=RunOptions(metric="score", mode="max"),
            backend=backend, profiler=profiler,
        )
        trials = controller.run()
        if profiles is not None:
            profiles.update(store.trial_profiles(experiment_id))
        results: dict[str, list[dict[str, Any]]] = {}
        for result in store.results(experiment_id):
            results.setdefault(result["trial_id"], []).append(result)
    return trials, results


def test_an_elastic_trial_takes_the_freed_cpus_in_place(tmp_path):
    backend = FakeBackend(cpus=4)
    trials, results = run(tmp_path, Elastic, backend)
    assert [t.status for t in trials] == ["TERMINATED"] * 4
    long = results[trials[3].trial_id]
    assert [r["training_iteration"] for r in long] == list(range(1, 9))
    assert [r["iterations_since_restore"] for r in long] == list(range(1, 9))  # never restarted
    assert long[0]["cpus"] == 1.0 and long[-1]["cpus"] == 4.0  # the three others' CPUs, once they ended
    # 4 trial actors, then 3 extension groups of one bundle each; all given back at the end
    assert backend.placed == 4 + 3 and backend.destroyed == backend.placed
    assert trials[3].placement_group_factory.bundles == [{"CPU": 1.0}]  # its own again, with its slot


def test_the_profile_counts_the_cpus_a_trial_grew_to(tmp_path):
    from tuner.execution.profiler import SweepProfiler

    profiles: dict = {}
    trials, _ = run(tmp_path, Elastic, FakeBackend(cpus=4), SweepProfiler(total_cpus=4), profiles)
    long, short = profiles[trials[3].trial_id], profiles[trials[0].trial_id]
    assert short["cpus"] == 1.0
    assert 1.0 < long["cpus"] <= 4.0  # its own CPU, then up to 4 once the others ended: the mean held


def test_another_trainable_is_restarted_with_its_new_resources(tmp_path):
    backend = FakeBackend(cpus=4)
    trials, results = run(tmp_path, Lengths, backend)
    assert [t.status for t in trials] == ["TERMINATED"] * 4
    long = results[trials[3].trial_id]
    assert [r["training_iteration"] for r in long] == list(range(1, 9))  # no gap, no repeat
    grown = [r for r in long if r["cpus"] > 1.0]
    assert grown and grown[-1]["cpus"] == 4.0  # restarted in a group of the new shape (one bundle)
    assert all(r["iterations_since_restore"] < r["training_iteration"] for r in grown)  # from its checkpoint
    assert [r["score"] for r in long] == [float(i) for i in range(1, 9)]  # its state went on


@pytest.mark.parametrize("trainable", [Elastic, Lengths])
def test_nothing_grows_while_the_cluster_is_full(tmp_path, trainable):
    backend = FakeBackend(cpus=4)
    _, results = run(tmp_path, trainable, backend)
    for rows in results.values():  # until the short trials ended, every trial ran with its 1 CPU
        assert all(r["cpus"] == 1.0 for r in rows if r["training_iteration"] <= 1)
