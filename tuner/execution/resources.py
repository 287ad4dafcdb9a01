"""Resource requests of trials: parsing, placement-group bundles, and fit against the cluster."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from schedulers.validation import is_number

_ALIASES = {"cpu": "CPU", "gpu": "GPU", "CPU": "CPU", "GPU": "GPU", "memory": "memory"}
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
DEFAULT_BUNDLES: tuple[dict[str, float], ...] = ({"CPU": 1.0},)


class PlacementGroupFactory:
    """The bundles and strategy of one trial's placement group (Ray Tune's name).

    Bundle 0 hosts the trial actor; further bundles are for actors the trainable starts.

    Example:
        >>> PlacementGroupFactory([{"CPU": 1}, {"CPU": 0.5}]).bundles
        [{'CPU': 1.0}, {'CPU': 0.5}]
    """

    def __init__(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK") -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"placement strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
        self.bundles = normalize_bundles(bundles, field="bundles")
        self.strategy = strategy

    def key(self) -> tuple[Any, ...]:
        """A hashable identity: trials with equal keys can share an actor and placement group."""
        return (self.strategy, tuple(tuple(sorted(b.items())) for b in self.bundles))

    def required(self) -> dict[str, float]:
        """The sum of all bundles."""
        total: dict[str, float] = {}
        for bundle in self.bundles:
            for name, amount in bundle.items():
                total[name] = total.get(name, 0.0) + amount
        return total

    @property
    def required_resources(self) -> dict[str, float]:
        """The sum of all bundles (Ray Tune's name)."""
        return self.required()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacementGroupFactory) and other.key() == self.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"PlacementGroupFactory({self.bundles}, strategy={self.strategy!r})"


def _bundle(raw: Mapping[str, Any], field: str) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{field}: each bundle must be a dict like {{'cpu': 1}}, got {raw!r}")
    bundle: dict[str, float] = {}
    for name, amount in raw.items():
        if not is_number(amount, numpy=False):
            raise ValueError(f"{field}: amount of {name!r} must be a number, got {amount!r}")
        if amount < 0:
            raise ValueError(f"{field}: amount of {name!r} must be >= 0, got {amount!r}")
        key = _ALIASES.get(name, name)
        if amount > 0:
            bundle[key] = bundle.get(key, 0.0) + float(amount)
    return bundle


def normalize_bundles(bundles: Sequence[Mapping[str, Any]], field: str = "resources_per_trial") -> list[dict[str, float]]:
    """Bundles with Ray's resource names ('cpu' -> 'CPU'), validated; empty bundles dropped after the first."""
    if isinstance(bundles, Mapping) or not isinstance(bundles, Sequence) or not bundles:
        raise ValueError(f"{field} must be a non-empty list of bundles (dicts), got {bundles!r}")
    out = [_bundle(b, field) for b in bundles]
    if not any(out[0].values()):
        # Ray cannot reserve an empty bundle; a zero-resource trial still needs a slot.
        out[0] = {"CPU": 0.001}
    return [out[0]] + [b for b in out[1:] if b]


def to_placement_group_factory(resources: Any, field: str = "resources_per_trial") -> PlacementGroupFactory:
    """Accept a PlacementGroupFactory, a dict like {'cpu': 0.5, 'gpu': 0}, or a list of bundles."""
    if resources is None:
        return PlacementGroupFactory(DEFAULT_BUNDLES)
    if isinstance(resources, PlacementGroupFactory):
        return resources
    if isinstance(resources, Mapping):
        return PlacementGroupFactory([resources]) if _bundle(resources, field) else PlacementGroupFactory([{}])
    if isinstance(resources, Sequence) and not isinstance(resources, (str, bytes)):
        return PlacementGroupFactory(normalize_bundles(resources, field))
    raise ValueError(
        f"{field} must be a dict like {{'cpu': 1}}, a list of such bundles, or a PlacementGroupFactory, "
        f"got {type(resources).__name__}"
    )


def fits(required: Mapping[str, float], available: Mapping[str, float]) -> bool:
    """Whether every resource in ``required`` is available (with a small float tolerance)."""
    return all(available.get(name, 0.0) + 1e-9 >= amount for name, amount in required.items())


def check_feasible(pgf: PlacementGroupFactory, nodes: Iterable[Mapping[str, float]], what: str) -> None:
    """Raise a ValueError when ``pgf`` can never be placed on the cluster with these node totals."""
    nodes = [dict(n) for n in nodes]
    cluster: dict[str, float] = {}
    for node in nodes:
        for name, amount in node.items():
            cluster[name] = cluster.get(name, 0.0) + amount
    for bundle in pgf.bundles:
        if not any(fits(bundle, node) for node in nodes):
            raise ValueError(
                f"{what}: bundle {bundle} fits on no node of the cluster "
                f"(largest node: {max(nodes, key=lambda n: n.get('CPU', 0.0)) if nodes else {}}); "
                f"the trial could never start"
            )
    need = pgf.required()
    if pgf.strategy.startswith("STRICT_PACK"):
        ok = any(fits(need, node) for node in nodes)
    else:
        ok = fits(need, cluster)
    if not ok:
        show = {k: round(v, 3) for k, v in cluster.items() if k in need}
        raise ValueError(
            f"{what}: the trial needs {need} in all but the cluster has only {show}; the trial could never start"
        )
