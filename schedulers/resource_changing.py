"""Ray Tune's ``ResourceChangingScheduler``: a scheduler's decisions, and live trials' resources
changed as the sweep goes (the CPUs of stopped trials go to the survivors).

Pure Python, no Ray import. Names, arguments and the allocation maths follow Ray Tune's
``ray.tune.schedulers.resource_changing_scheduler`` (``DistributeResources``,
``DistributeResourcesToTopJob``), so a Ray Tune script ports by changing its imports.

How a change is applied is the controller's (:class:`ResourceControllerLike`): a trainable that
takes new resources while it runs (our trainers: their rollout actors grow and shrink with their
bundles, see ``algorithms/core/trainer.py``) gets them in place and the decision stays
CONTINUE; any other trial is paused at a checkpoint and restarted with the new resources, which
is what Ray Tune does for every trial. Resources are placement-group bundles as plain data: a
list of dicts like ``[{"CPU": 1.0}, {"CPU": 0.5}]`` (bundle 0 hosts the trial itself).
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any, Callable, Mapping, Protocol, Sequence, cast, runtime_checkable

from schedulers._common import arg_error, check_bool, check_mode, check_optional_name, plain
from schedulers.trial_scheduler import ControllerLike, FIFOScheduler, TrialLike, TrialScheduler
from schedulers.validation import is_int, is_number

__all__ = [
    "DistributeResources",
    "DistributeResourcesToTopJob",
    "ResourceChangingScheduler",
    "ResourceControllerLike",
    "RESOURCES_IN_PLACE",
    "RESOURCES_ON_RESTART",
    "RESOURCES_REFUSED",
]

logger = logging.getLogger(__name__)

Bundles = list[dict[str, float]]

#: What ``ResourceControllerLike.set_trial_resources`` answers.
RESOURCES_IN_PLACE = "in_place"  # the running trial has them now: it goes on (CONTINUE)
RESOURCES_ON_RESTART = "on_restart"  # the trial takes them when it next starts: pause it (PAUSE)
RESOURCES_REFUSED = "refused"  # not now (not free yet, or the trial cannot be paused): nothing changed

#: The resources an allocation may move, as Ray Tune's allocation functions do.
_KEYS = ("CPU", "GPU")


@runtime_checkable
class ResourceControllerLike(ControllerLike, Protocol):
    """What ``ResourceChangingScheduler`` (and its allocation functions) ask of a controller,
    beyond :class:`~schedulers.trial_scheduler.ControllerLike`. A controller without these
    methods (the simulator) simply never has its trials' resources changed."""

    def get_live_trials(self) -> list[Any]:
        """The trials that have not ended (PENDING, RUNNING, PAUSED), in the order they were added."""
        ...

    def cluster_resources(self) -> dict[str, float]:
        """The cluster's total resources (name -> amount), e.g. ``{"CPU": 16.0}``."""
        ...

    def set_trial_resources(self, trial: Any, bundles: Bundles) -> str:
        """Give ``trial`` (the one whose result is being decided) the placement-group ``bundles``.

        Answers ``RESOURCES_IN_PLACE`` when the running trial has them now (its trainable took
        them: it goes on), ``RESOURCES_ON_RESTART`` when the trial will have them once restarted
        (the scheduler then answers PAUSE: Ray Tune's way), or ``RESOURCES_REFUSED`` when nothing
        changed (the extra resources are not free, or the trial cannot be paused)."""
        ...


def bundles_of(resources: Any) -> Bundles:
    """Plain bundles from a list of dicts or an object with ``bundles`` (a PlacementGroupFactory)."""
    raw = getattr(resources, "bundles", resources)
    if isinstance(raw, Mapping) or not isinstance(raw, Sequence) or not raw:
        raise ValueError(f"resources must be a non-empty list of bundles or a PlacementGroupFactory, got {resources!r}")
    out: Bundles = []
    for bundle in raw:
        if not isinstance(bundle, Mapping):
            raise ValueError(f"resources: each bundle must be a dict like {{'CPU': 1}}, got {bundle!r}")
        out.append({str(k).upper() if str(k).lower() in ("cpu", "gpu") else str(k): float(v)
                    for k, v in bundle.items() if v})
    return out


def same_bundles(a: Bundles, b: Bundles) -> bool:
    """Equal bundles, ignoring zero amounts and float noise."""
    def norm(bundles: Bundles) -> list[list[tuple[str, float]]]:
        return [sorted((k, round(v, 9)) for k, v in bundle.items() if v) for bundle in bundles]
    return norm(a) == norm(b)


def _resources(trial: Any) -> Any:
    """A trial's current resources (``placement_group_factory``: beyond what ``TrialLike`` promises)."""
    return trial.placement_group_factory


def _total(bundles: Sequence[Mapping[str, float]]) -> dict[str, float]:
    total = {"CPU": 0.0, "GPU": 0.0}
    for bundle in bundles:
        for name, amount in bundle.items():
            total[name] = total.get(name, 0.0) + amount
    return total


def _check_resource_dict(owner: str, field: str, value: Any, *, allow_empty: bool) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise arg_error(owner, field, f"None or a dict with keys among {list(_KEYS)}", value)
    out: dict[str, float] = {}
    for key, amount in value.items():
        if key not in _KEYS:
            raise arg_error(owner, field, f"a dict with keys among {list(_KEYS)} (unknown key {key!r})", value)
        if not is_number(amount, finite=True) or amount < 0:
            raise arg_error(owner, field, "a dict of numbers >= 0", value)
        out[key] = float(amount)
    if not allow_empty and value and not any(out.values()):
        raise arg_error(owner, field, "None or a dict with a positive amount of CPU or GPU", value)
    return out


class DistributeResources:
    """Ray Tune's uniform allocation: the cluster's CPUs and GPUs (less ``reserve_resources``)
    shared evenly among the live trials, in units of ``increase_by``, on top of each trial's base
    resources (the first trial's, ``scheduler.base_trial_resources``), never below them.

    ``add_bundles=False``: the units are added to the trial's single bundle (the base request must
    be one bundle). ``add_bundles=True``: each unit is one more bundle of ``increase_by``'s shape
    (by default the base request's last bundle): for our trainers, one more rollout actor per
    bundle. ``add_bundles=None`` (the default; Ray Tune's is False) follows the request: a trial of
    one bundle grows it, one of several (a trainer with its rollout actors) gets more bundles, so a
    Ray Tune script's ``ResourceChangingScheduler(base_scheduler=...)`` grows our trainers' actors. ``increase_by_times`` >= 1 caps the units a trial gets. A trial holding more than is
    free (others grew first, or new trials came) is brought down. Returns the trial's new bundles,
    or None before its first iteration.

    Example:
        >>> DistributeResources(add_bundles=True, increase_by={"CPU": 1}).increase_by
        {'CPU': 1.0}
    """

    def __init__(
        self,
        add_bundles: bool | None = None,
        increase_by: Mapping[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: Mapping[str, float] | None = None,
    ) -> None:
        owner = type(self).__name__
        self.add_bundles = None if add_bundles is None else check_bool(owner, "add_bundles", add_bundles)
        # Whether units are bundles of their own: add_bundles, or (None) decided by the base request.
        self._adding = bool(add_bundles)
        self.increase_by = _check_resource_dict(owner, "increase_by", increase_by, allow_empty=False)
        if not is_int(increase_by_times):
            raise arg_error(owner, "increase_by_times", "an int (< 1: no limit)", increase_by_times)
        self.increase_by_times = int(increase_by_times)
        self.reserve_resources = _check_resource_dict(owner, "reserve_resources", reserve_resources, allow_empty=True)
        self.metric: str | None = None
        self.mode: str | None = None

    # -- checks the scheduler runs before anything starts -----------------------------------------
    def check_base(self, base: Bundles) -> None:
        """Raise a ValueError when the base request cannot be grown the way this function grows it."""
        if self.add_bundles is None:
            self._adding = len(base) > 1
        if not self._adding and len(base) > 1:
            raise ValueError(
                f"{type(self).__name__}: add_bundles=False needs a one-bundle resource request, but trials ask "
                f"for {len(base)} bundles ({base}); pass add_bundles=True or leave it out (our trainers: one bundle per "
                f"rollout actor, so each unit is one more rollout actor)"
            )
        unit = self._unit(base)
        if not any(unit.get(k, 0.0) for k in _KEYS):
            raise ValueError(f"{type(self).__name__}: increase_by: the unit {unit} holds no CPU or GPU; pass increase_by=")

    def _unit(self, base: Bundles) -> dict[str, float]:
        if self.increase_by:
            return dict(self.increase_by)
        if self._adding:
            return dict(base[-1])
        return {"GPU": 1.0} if base[0].get("GPU", 0.0) else {"CPU": 1.0}

    # -- the allocation ----------------------------------------------------------------------------
    def __call__(self, controller: Any, trial: TrialLike, result: Mapping[str, Any], scheduler: Any) -> Bundles | None:
        base = scheduler.base_trial_resources
        if base is None or result.get("training_iteration", 0) < 1:
            return None
        base = bundles_of(base)
        self.check_base(base)
        unit = self._unit(base)
        total = controller.cluster_resources()
        available = {k: total.get(k, 0.0) - self.reserve_resources.get(k, 0.0) for k in _KEYS}
        live = controller.get_live_trials()
        used = _total([b for t in live for b in bundles_of(_resources(t))])
        free = {k: available[k] - used.get(k, 0.0) for k in _KEYS}
        added = self._new_added(trial, live, base, unit, available, free)
        return self._combine(base, added, unit, limit=False)

    def _new_added(self, trial: TrialLike, live: list[Any], base: Bundles, unit: dict[str, float],
                   available: dict[str, float], free: dict[str, float]) -> Bundles:
        """The units above the base the trial should hold: its current ones, plus what is free,
        capped at its even share (Ray Tune's round robin over a clean slate)."""
        n = len(live)
        base_total = _total(base)
        left = {k: available[k] - base_total.get(k, 0.0) * n for k in _KEYS}
        shares: list[Bundles] = [[] for _ in range(n)]
        at_limit: set[int] = set()
        share_of_first = 0
        i = 0
        while len(at_limit) < n and all(left[k] >= unit.get(k, 0.0) for k in _KEYS):
            idx = i % n
            before = copy.deepcopy(shares[idx])
            shares[idx] = self._modify(shares[idx], unit, left, max_multiplier=1)
            got = _total(self._added(shares[idx], before))
            if not got["CPU"] and not got["GPU"]:
                at_limit.add(idx)
            elif idx == 0:
                share_of_first += 1
            for k in _KEYS:
                left[k] -= got[k]
            i += 1
        current = self._added(bundles_of(_resources(trial)), base)
        return self._modify(current, unit, free, max_increase_by_times=share_of_first)

    def _multiplier(self, unit: Mapping[str, float], amounts: Mapping[str, float], max_multiplier: int = -1) -> int:
        """How many ``unit`` s fit in ``amounts`` (negative when they are below zero)."""
        cpu, gpu = unit.get("CPU", 0.0), unit.get("GPU", 0.0)
        if cpu and gpu:
            m = min(amounts["CPU"] // cpu, amounts["GPU"] // gpu)
        elif gpu:
            m = amounts["GPU"] // gpu
        else:
            m = amounts["CPU"] // cpu
        if max_multiplier > 0 and m > 0:
            m = min(max_multiplier, m)
        return int(m)

    def _modify(self, bundles: Bundles, unit: dict[str, float], amounts: Mapping[str, float], *,
                max_multiplier: int = -1, max_increase_by_times: int = -1) -> Bundles:
        m = self._multiplier(unit, amounts, max_multiplier)
        if m < 0:
            return self._remove(bundles, unit, m)
        if m > 0:
            return self._combine(bundles, self._new(unit, m), unit, limit=True, max_times=max_increase_by_times)
        return bundles

    def _remove(self, bundles: Bundles, unit: dict[str, float], m: int) -> Bundles:
        m = -abs(m)
        if self._adding:
            return bundles[:m]
        bundles = copy.deepcopy(bundles) or [{}]
        for k in _KEYS:
            bundles[0][k] = max(bundles[0].get(k, 0.0) + unit.get(k, 0.0) * m, 0.0)
        return bundles

    def _new(self, unit: dict[str, float], m: int) -> Bundles:
        if self._adding:
            return [dict(unit) for _ in range(abs(m))]
        return [{k: unit.get(k, 0.0) * abs(m) for k in _KEYS}]

    def _combine(self, a: Bundles, b: Bundles, unit: dict[str, float], *, limit: bool, max_times: int = -1) -> Bundles:
        if limit:
            if max_times > 0 and self.increase_by_times > 0:
                max_times = min(max_times, self.increase_by_times)
            elif self.increase_by_times > 0:
                max_times = self.increase_by_times
        if self._adding:
            out = [dict(x) for x in a if x.get("CPU", 0.0) or x.get("GPU", 0.0)]
            out += [dict(x) for x in b if x.get("CPU", 0.0) or x.get("GPU", 0.0)]
            return out[:max_times] if max_times > 0 else out
        a, b = a or [{}], b or [{}]
        merged = {k: a[0].get(k, 0.0) + b[0].get(k, 0.0) for k in _KEYS}
        merged.update({k: v for k, v in a[0].items() if k not in _KEYS})  # custom resources stay
        if max_times > 0:
            for k in _KEYS:
                merged[k] = min(merged[k], unit.get(k, 0.0) * max_times)
        return [merged]

    def _added(self, bundles: Bundles, base: Bundles) -> Bundles:
        if self._adding:
            return [dict(b) for b in bundles[len(base):]]
        first, base0 = (bundles or [{}])[0], (base or [{}])[0]
        return [{k: first.get(k, 0.0) - base0.get(k, 0.0) for k in _KEYS}]


class DistributeResourcesToTopJob(DistributeResources):
    """Ray Tune's allocation to the best trial: every free unit goes to the best live trial by
    ``metric`` and ``mode`` (the scheduler's when not given) that is below its cap; the others keep
    what they have, unless more is held than exists."""

    def __init__(
        self,
        add_bundles: bool | None = None,
        increase_by: Mapping[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: Mapping[str, float] | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__(add_bundles, increase_by, increase_by_times, reserve_resources)
        owner = type(self).__name__
        self.metric = check_optional_name(owner, "metric", metric)
        self.mode = check_mode(owner, mode)

    def _new_added(self, trial: TrialLike, live: list[Any], base: Bundles, unit: dict[str, float],
                   available: dict[str, float], free: dict[str, float]) -> Bundles:
        if self.metric is None or self.mode is None:
            raise ValueError(f"{type(self).__name__}: metric and mode must be set (here, in the base scheduler "
                             f"or in tune.run)")
        sign = 1.0 if self.mode == "max" else -1.0
        metric = self.metric

        def score(t: Any) -> float:
            value = (t.last_result or {}).get(metric)
            return sign * float(cast(float, value)) if is_number(value) else -math.inf

        ranked = sorted(live, key=score, reverse=True)
        added = self._added(bundles_of(_resources(trial)), base)
        best = next((t for t in ranked if self._below_limit(bundles_of(_resources(t)), base)), ranked[0])
        if trial.trial_id != best.trial_id and self._multiplier(unit, free) >= 0:
            return added
        return self._modify(added, unit, free)

    def _below_limit(self, bundles: Bundles, base: Bundles) -> bool:
        cap = {k: self.increase_by.get(k, 0.0) * self.increase_by_times if self.increase_by_times > 0 else math.inf
               for k in _KEYS}
        got = _total(self._added(bundles, base))
        return got["CPU"] < (cap["CPU"] or math.inf) or got["GPU"] < (cap["GPU"] or math.inf)


class ResourceChangingScheduler(TrialScheduler):
    """Wraps ``base_scheduler`` (FIFO when None) and changes live trials' resources with
    ``resources_allocation_function(controller, trial, result, scheduler) -> bundles | None``
    (Ray Tune's signature; a PlacementGroupFactory is accepted as the answer too).

    Every hook is the base scheduler's. After the base answers CONTINUE for a result, the
    function is asked for the trial's resources; when they differ from what the trial holds the
    controller is asked to change them: in place for a trainable that can take them while it
    runs (the decision stays CONTINUE), else by pausing it at a checkpoint and restarting it with
    them (the decision becomes PAUSE: Ray Tune's way). ``base_trial_resources`` is the first
    trial's request; trials must all ask for the same (as in Ray Tune).

    Example:
        >>> from schedulers import ASHAScheduler
        >>> s = ResourceChangingScheduler(ASHAScheduler(), DistributeResources(add_bundles=True))
        >>> type(s.base_scheduler).__name__
        'ASHAScheduler'
    """

    def __init__(
        self,
        base_scheduler: TrialScheduler | None = None,
        resources_allocation_function: Callable[..., Any] | None = DistributeResources(),
    ) -> None:
        owner = type(self).__name__
        if base_scheduler is not None and not isinstance(base_scheduler, TrialScheduler):
            raise arg_error(owner, "base_scheduler", "None or a TrialScheduler (e.g. ASHAScheduler())", base_scheduler)
        if isinstance(base_scheduler, ResourceChangingScheduler):
            raise arg_error(owner, "base_scheduler", "a scheduler other than a ResourceChangingScheduler", base_scheduler)
        if resources_allocation_function is not None and not callable(resources_allocation_function):
            raise arg_error(owner, "resources_allocation_function",
                            "None or a callable (controller, trial, result, scheduler) -> bundles | None",
                            resources_allocation_function)
        if resources_allocation_function is None:
            logger.warning("%s: resources_allocation_function is None: no trial's resources will change", owner)
        self._base = base_scheduler if base_scheduler is not None else FIFOScheduler()
        super().__init__(metric=self._base.metric, mode=self._base.mode)
        # Ray Tune's default is one shared instance; ours is copied so its metric/mode stay ours.
        fn = resources_allocation_function
        self._allocate = copy.copy(fn) if isinstance(fn, DistributeResources) else fn
        self._base_trial_resources: Bundles | None = None
        self._reallocated: set[str] = set()
        self.never_pauses = self._base.never_pauses and self._allocate is None

    @property
    def base_scheduler(self) -> TrialScheduler:
        return self._base

    @property
    def resources_allocation_function(self) -> Callable[..., Any] | None:
        return self._allocate

    @property
    def base_trial_resources(self) -> Bundles | None:
        """The first trial's bundles: what every trial asks for, and the floor of an allocation."""
        return copy.deepcopy(self._base_trial_resources)

    @property
    def metric(self) -> str | None:
        return self._base.metric

    @property
    def mode(self) -> str | None:
        return self._base.mode

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        self._metric, self._mode = metric, mode
        return self._base.set_search_properties(metric, mode, **spec)

    # -- hooks -----------------------------------------------------------------------------------
    def on_trial_add(self, controller: ControllerLike, trial: TrialLike) -> None:
        resources = getattr(trial, "placement_group_factory", None)
        if resources is not None:
            bundles = bundles_of(resources)
            if self._base_trial_resources is None:
                if isinstance(self._allocate, DistributeResources):
                    self._allocate.check_base(bundles)  # before the trial runs
                self._base_trial_resources = bundles
            elif trial.trial_id not in self._reallocated and not same_bundles(bundles, self._base_trial_resources):
                raise ValueError(
                    f"{type(self).__name__}: trials must all ask for the same resources (Ray Tune's rule): the first "
                    f"asked for {self._base_trial_resources}, trial {trial.trial_id} asks for {bundles}"
                )
        self._base.on_trial_add(controller, trial)

    def on_trial_error(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._base.on_trial_error(controller, trial)

    def on_trial_result(self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]) -> str:
        decision = self._base.on_trial_result(controller, trial, result)
        if decision != self.CONTINUE:
            return decision
        new = self.reallocate_trial_resources_if_needed(controller, trial, result)
        if new is None:
            return decision
        answer = controller.set_trial_resources(trial, new)  # type: ignore[attr-defined]
        if answer == RESOURCES_REFUSED:
            return decision
        self._reallocated.add(trial.trial_id)
        return self.PAUSE if answer == RESOURCES_ON_RESTART else decision

    def reallocate_trial_resources_if_needed(
        self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any]
    ) -> Bundles | None:
        """The trial's new bundles from the allocation function, or None when they are what it
        has (or the controller cannot change resources)."""
        if self._allocate is None or not isinstance(controller, ResourceControllerLike):
            return None
        if getattr(self._allocate, "metric", None) is None and hasattr(self._allocate, "metric"):
            self._allocate.metric = self._base.metric or self._metric
        if getattr(self._allocate, "mode", None) is None and hasattr(self._allocate, "mode"):
            self._allocate.mode = self._base.mode or self._mode
        answer = self._allocate(controller, trial, result, self)
        if answer is None:
            return None
        new = bundles_of(answer)
        current = getattr(trial, "placement_group_factory", None)
        if current is not None and same_bundles(new, bundles_of(current)):
            return None
        return new

    def on_trial_complete(self, controller: ControllerLike, trial: TrialLike, result: Mapping[str, Any] | None) -> None:
        self._base.on_trial_complete(controller, trial, result)

    def on_trial_remove(self, controller: ControllerLike, trial: TrialLike) -> None:
        self._base.on_trial_remove(controller, trial)

    def choose_trial_to_run(self, controller: ControllerLike) -> TrialLike | None:
        return self._base.choose_trial_to_run(controller)

    def stop_means_complete(self, trial: TrialLike, result: Mapping[str, Any]) -> bool:
        return self._base.stop_means_complete(trial, result)

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "base": self._base.state_dict(),
            "base_trial_resources": plain(self._base_trial_resources),
            "reallocated": sorted(self._reallocated),
            "metric": self._metric,
            "mode": self._mode,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._base.load_state_dict(state["base"])
        base = state.get("base_trial_resources")
        self._base_trial_resources = plain(base) if base is not None else None
        self._reallocated = set(state.get("reallocated", []))
        self._metric = state.get("metric", self._metric)
        self._mode = state.get("mode", self._mode)

    def debug_string(self) -> str:
        return f"(ResourceChangingScheduler) {self._base.debug_string()}"
