"""A sweep spec (YAML) validated as a whole into the arguments of ``tune.run``.

Nothing runs and nothing is written before every key has been checked; each error names the key
path and what was expected. The keys::

    name: ppo_asha                  # the sweep's name (default: the spec file's name and the time)
    description: free text
    trainable: PPO                  # a registered name, or module:function / module:Class
    metric: episode_return_mean
    mode: max
    num_samples: 8
    seed: 0
    search: random                  # random | grid | {type: optuna, sampler: tpe, sampler_args: {...}}
    scheduler: {type: asha, time_attr: env_steps_total, grace_period: 20000, max_t: 100000}
    stop: {env_steps_total: 100000} # result key -> threshold (a trial stops once it is reached)
    time_budget_s: 600
    resources: {cpu: 1}             # or a list of bundles; default: the trainable's own request
    max_concurrent_trials: 2
    cpu_share: 0.5                  # the share of the cluster's CPUs it may hold (tuner submit: 0.5)
    max_failures: 0
    checkpoint_freq: 0
    checkpoint_at_end: false
    storage_path: ~/tuner_results
    database_url: null              # any SQLAlchemy URL; default: SQLite in storage_path/name
    tensorboard: true
    tensorboard_dir: null
    config: {env: CartPole-v1, lr: {loguniform: [1.0e-4, 3.0e-3]}}
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from schedulers.validation import is_number
from tuner.cli import components, trainables
from tuner.cli.checks import (
    check_keys,
    describe,
    expect_bool,
    expect_choice,
    expect_int,
    expect_mapping,
    expect_number,
    expect_str,
    join,
)
from tuner.cli.errors import SpecError
from tuner.cli.overrides import apply_overrides
from tuner.cli.paths import default_storage_path
from tuner.storage import check_storage_path, is_uri
from tuner.cli.space import parse_space, searched_keys
from tuner.cli.yaml_io import load_spec_file
from tuner.pack_trials import check_pack_trials
from tuner.tune_config import SWEEP_NAME_RULE, default_sweep_name, is_sweep_name

if TYPE_CHECKING:
    from tuner.trainable.trainable import Trainable

KEYS = (
    "name", "description", "trainable", "metric", "mode", "num_samples", "seed", "search", "scheduler",
    "stop", "time_budget_s", "resources", "max_concurrent_trials", "cpu_share", "max_failures", "checkpoint_freq",
    "checkpoint_at_end", "pack_trials", "storage_path", "database_url", "tensorboard", "tensorboard_dir", "config",
)
REQUIRED = ("trainable", "config")


@dataclasses.dataclass
class SweepSpec:
    """A validated spec: ``document`` is the YAML it came from (overrides applied, name set)."""

    document: dict[str, Any]
    name: str
    trainable: Any
    trainable_cls: type[Trainable]
    metric: str | None
    mode: str | None
    config: dict[str, Any]
    storage_path: str
    database_url: str | None

    @property
    def run_dir(self) -> Path:
        """The sweep's folder on this machine (with object storage, where its store and logs stay)."""
        if is_uri(self.storage_path):
            return Path(default_storage_path()).expanduser().absolute() / self.name
        return Path(self.storage_path).expanduser().absolute() / self.name

    @property
    def searched(self) -> dict[str, str]:
        """Flattened keys of the searched hyperparameters -> their kind."""
        return searched_keys(self.config)

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``tune.run``, fields of its ``RunOptions`` (fresh scheduler and searcher objects
        each call)."""
        doc = self.document
        seed = doc.get("seed")
        return {
            "config": copy.deepcopy(self.config),
            "num_samples": doc.get("num_samples", 1),
            "metric": self.metric,
            "mode": self.mode,
            "scheduler": components.build_scheduler(doc.get("scheduler")),
            "search_alg": components.build_searcher(doc.get("search"), seed),
            "stop": doc.get("stop"),
            "time_budget_s": doc.get("time_budget_s"),
            "resources_per_trial": doc.get("resources"),
            "max_concurrent_trials": doc.get("max_concurrent_trials"),
            "cpu_share": doc.get("cpu_share"),
            "max_failures": doc.get("max_failures", 0),
            "checkpoint_freq": doc.get("checkpoint_freq", 0),
            "checkpoint_at_end": doc.get("checkpoint_at_end", False),
            "pack_trials": doc.get("pack_trials", "auto"),
            "storage_path": self.storage_path,
            "database_url": self.database_url,
            "name": self.name,
            "seed": seed,
            "tensorboard": doc.get("tensorboard", True),
            "tensorboard_dir": doc.get("tensorboard_dir"),
        }


def _check_name(value: Any) -> str:
    name = expect_str(value, "name")
    if not is_sweep_name(name):  # tune.run's own rule: the run directory stays inside storage_path
        raise SpecError("name", f"expected {SWEEP_NAME_RULE}, got {name!r}")
    return name


def _check_stop(value: Any) -> None:
    if value is None:
        return
    stop = expect_mapping(value, "stop")
    for key, threshold in stop.items():
        if not is_number(threshold, numpy=False):
            raise SpecError(join("stop", key), f"expected a number (the trial stops once its result "
                                               f"reaches it), got {describe(threshold)}")


def _check_resources(value: Any) -> None:
    if value is None:
        return
    from tuner.execution.resources import to_placement_group_factory

    if not isinstance(value, (Mapping, list)):
        raise SpecError("resources", f"expected a mapping like {{cpu: 1}} or a list of bundles, got {describe(value)}")
    try:
        to_placement_group_factory(value, field="resources")
    except (ValueError, TypeError) as exc:
        raise SpecError("resources", str(exc).removeprefix("resources ").removeprefix("resources: ")) from None


def _check_database_url(value: Any) -> str | None:
    if value is None:
        return None
    from sqlalchemy.engine import make_url

    from tuner.store import mask_url

    if not isinstance(value, str) or not value:
        raise SpecError("database_url", f"expected a SQLAlchemy URL string or null, got a {type(value).__name__}")
    try:
        make_url(value)
    except Exception:  # noqa: BLE001 - sqlalchemy's ArgumentError and friends
        raise SpecError("database_url", f"not a database URL: {mask_url(value)!r} (expected e.g. "
                                        f"postgresql+psycopg://user@host/db)") from None
    return value


def _check_metric_mode(doc: Mapping[str, Any]) -> tuple[str | None, str | None]:
    metric = expect_str(doc.get("metric"), "metric", allow_none=True)
    mode = doc.get("mode")
    if mode is not None:
        expect_choice(mode, "mode", ("min", "max"), "mode")
    if (metric is None) != (mode is None):
        missing = "mode" if mode is None else "metric"
        raise SpecError(missing, "missing: metric and mode go together")
    needs = []
    scheduler = doc.get("scheduler")
    kind = scheduler if isinstance(scheduler, str) else scheduler.get("type") if isinstance(scheduler, Mapping) else None
    if kind not in (None, "fifo", "pbt_replay"):  # a replay follows a stored schedule: no metric
        needs.append(f"scheduler {kind!r}")
    if components.search_type(doc.get("search")) == "optuna":
        needs.append("search 'optuna'")
    if needs and metric is None:
        raise SpecError("metric", f"missing: {' and '.join(needs)} need(s) metric and mode")
    return metric, mode


def _check_search(doc: Mapping[str, Any], config: dict[str, Any], metric: str | None, mode: str | None) -> None:
    kind = components.search_type(doc.get("search"))
    searched = searched_keys(config)
    if kind == "grid":
        grid = [k for k, v in searched.items() if v == "grid"]
        if not grid:
            raise SpecError("config", "search 'grid' needs at least one grid axis, e.g. lr: {grid: [0.001, 0.01]}")
        other = [k for k, v in searched.items() if v != "grid"]
        if other:
            raise SpecError(join("config", other[0].replace("/", ".")),
                            f"search 'grid' takes grid axes only ({{grid: [...]}}), got a {searched[other[0]]} "
                            f"domain (use search: random to mix grid axes and sampled values)")
    if kind == "optuna" and not searched:
        raise SpecError("config", "search 'optuna' needs at least one searched value, e.g. "
                                  "lr: {loguniform: [1.0e-4, 1.0e-2]}")
    searcher = components.build_searcher(doc.get("search"), doc.get("seed"))
    try:
        accepted = searcher.set_search_properties(metric, mode, copy.deepcopy(config),
                                                  num_samples=doc.get("num_samples", 1), seed=doc.get("seed"))
    except ValueError as exc:
        raise SpecError("config", str(exc)) from None
    if not accepted:
        raise SpecError("search", f"{type(searcher).__name__} refused the search space or metric/mode")


def _check_scheduler(doc: Mapping[str, Any], config: dict[str, Any], metric: str | None, mode: str | None) -> None:
    scheduler = components.build_scheduler(doc.get("scheduler"))
    try:
        accepted = scheduler.set_search_properties(metric, mode, config=copy.deepcopy(config))
    except ValueError as exc:
        raise SpecError("scheduler", str(exc)) from None
    if not accepted:
        raise SpecError("scheduler", "the scheduler refused the spec's metric/mode")


def _sample_config(config: dict[str, Any], seed: Any) -> dict[str, Any]:
    from tuner.search.basic_variant import BasicVariantGenerator

    generator = BasicVariantGenerator(random_state=seed if isinstance(seed, int) else 0)
    generator.set_search_properties(None, None, copy.deepcopy(config), num_samples=1)
    sample = generator.suggest("spec-check")
    return sample if isinstance(sample, dict) else {}


def _check_trainable_config(trainable_cls: type[Trainable], config: dict[str, Any], doc: Mapping[str, Any]) -> None:
    """A trainer that checks its config (PPO: unknown keys, bad values) is asked before anything runs."""
    from tuner.trainable.trainable import Trainable

    if doc.get("resources") is not None or trainable_cls.default_resource_request is Trainable.default_resource_request:
        return
    search = doc.get("search")
    points = search.get("points_to_evaluate") if isinstance(search, Mapping) else None
    sample = _sample_config(config, doc.get("seed"))
    if points and isinstance(points[0], Mapping):  # the first trial's config: the point over the sampled space
        sample = {**sample, **copy.deepcopy(points[0])}
    try:
        trainable_cls.default_resource_request(sample)
    except (ValueError, TypeError, KeyError) as exc:
        raise SpecError("config", str(exc)) from None
    if isinstance(doc.get("metric"), str):
        try:
            trainable_cls.check_metric(doc["metric"], sample)
        except ValueError as exc:
            raise SpecError("metric", str(exc)) from None


def validate(document: Any, *, default_name: str | None = None) -> SweepSpec:
    """Check every key of a spec document; the first problem raises a SpecError."""
    if document is None:
        raise SpecError("", "the spec is empty (expected a mapping with at least trainable and config)")
    doc = expect_mapping(document, "")
    check_keys(doc, "", KEYS, REQUIRED)
    if doc.get("name") is None and default_name is not None:
        doc["name"] = default_name
    name = _check_name(doc.get("name"))
    if doc.get("description") is not None:
        expect_str(doc["description"], "description")
    search = doc.get("search")
    points = search.get("points_to_evaluate") if isinstance(search, Mapping) else None
    expect_int(doc.get("num_samples", 1), "num_samples", minimum=0 if points else 1)
    expect_int(doc.get("seed"), "seed", minimum=0, allow_none=True)
    expect_number(doc.get("time_budget_s"), "time_budget_s", positive=True, allow_none=True)
    expect_int(doc.get("max_concurrent_trials"), "max_concurrent_trials", minimum=1, allow_none=True)
    share = expect_number(doc.get("cpu_share"), "cpu_share", positive=True, allow_none=True)
    if share is not None and share > 1:
        raise SpecError("cpu_share", f"expected a number in (0, 1] (the share of the cluster's CPUs), got {share!r}")
    expect_int(doc.get("max_failures", 0), "max_failures", minimum=-1)
    expect_int(doc.get("checkpoint_freq", 0), "checkpoint_freq", minimum=0)
    expect_bool(doc.get("checkpoint_at_end", False), "checkpoint_at_end")
    try:
        check_pack_trials(doc.get("pack_trials", "auto"))
    except ValueError as exc:
        raise SpecError("pack_trials", "expected " + str(exc).removeprefix("pack_trials must be ")) from None
    expect_bool(doc.get("tensorboard", True), "tensorboard")
    expect_str(doc.get("tensorboard_dir"), "tensorboard_dir", allow_none=True)
    storage_path = expect_str(doc.get("storage_path"), "storage_path", allow_none=True) or default_storage_path()
    try:
        check_storage_path(storage_path)
    except ValueError as exc:
        raise SpecError("storage_path", str(exc).removeprefix("storage_path: ")) from None
    database_url = _check_database_url(doc.get("database_url"))
    _check_stop(doc.get("stop"))
    _check_resources(doc.get("resources"))
    metric, mode = _check_metric_mode(doc)
    search = doc.get("search")
    only_points = doc.get("num_samples") == 0 and isinstance(search, Mapping) and bool(search.get("points_to_evaluate"))
    # num_samples 0 and config {}: the points are the trials' whole configs (a validation's spec)
    config = {} if only_points and doc.get("config") == {} else parse_space(doc.get("config"))
    components.build_scheduler(doc.get("scheduler"))  # its keys and values, before the search space's
    components.build_searcher(doc.get("search"), doc.get("seed"))
    _check_search(doc, config, metric, mode)
    _check_scheduler(doc, config, metric, mode)
    trainable, trainable_cls = trainables.resolve(doc.get("trainable"))
    from tuner.trainable.function_trainable import FunctionTrainable

    if doc.get("checkpoint_freq") and issubclass(trainable_cls, FunctionTrainable):
        raise SpecError("checkpoint_freq", "a function trainable checkpoints itself through "
                                           "tune.report(..., checkpoint=...); use it with a Trainable class")
    _check_trainable_config(trainable_cls, config, doc)
    return SweepSpec(
        document=doc, name=name, trainable=trainable, trainable_cls=trainable_cls, metric=metric, mode=mode,
        config=config, storage_path=storage_path, database_url=database_url,
    )


def load(path: str | os.PathLike[str], overrides: Sequence[str] = (), name: str | None = None,
         database_url: str | None = None, storage_path: str | None = None) -> SweepSpec:
    """Read, override (``--set``, ``--name``, ``--database-url``, ``--storage-path``) and validate
    the spec at ``path``."""
    document = apply_overrides(load_spec_file(path), overrides)
    if isinstance(document, dict):
        if name is not None:
            document["name"] = name
        if database_url is not None:
            document["database_url"] = database_url
        if storage_path is not None:
            document["storage_path"] = storage_path
    return validate(document, default_name=default_sweep_name(Path(path).stem))


__all__ = ["KEYS", "SweepSpec", "load", "validate"]
