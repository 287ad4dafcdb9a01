"""``tune.with_parameters`` and ``tune.with_resources``: wrap a trainable before handing it to a sweep."""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Mapping

import ray

from tuner.execution.resources import PlacementGroupFactory, to_placement_group_factory
from tuner.trainable.function_trainable import FunctionTrainable, wrap_function
from tuner.trainable.trainable import Trainable

_NOTHING = object()
_pending: list["Parameter"] = []  # created before Ray was started: put when it starts
_pending_lock = threading.Lock()
_hook_registered = False


class Parameter:
    """An object handed to trials by ``with_parameters``: put in Ray's object store once (at once
    if Ray runs, else as soon as it starts), after which only its ObjectRef travels with the
    trainable, whichever trial and actor unpickles it."""

    def __init__(self, value: Any) -> None:
        self._value = value
        self._ref: ray.ObjectRef | None = None
        if ray.is_initialized():
            self.put()
        else:
            _defer(self)

    @property
    def ref(self) -> ray.ObjectRef | None:
        """The object's ObjectRef (None until Ray has started)."""
        return self._ref

    def put(self) -> None:
        """Put the object in Ray's object store (once) and let go of the driver's own copy."""
        if self._ref is None:
            self._ref = ray.put(self._value)
            self._value = _NOTHING

    def get(self) -> Any:
        """The object (inside a trial: read from the object store, zero-copy for numpy arrays)."""
        if self._ref is None:
            return self._value
        return ray.get(self._ref)

    def __reduce__(self) -> tuple[Any, ...]:
        if self._ref is None:
            raise RuntimeError(
                "tune.with_parameters: the trainable was sent somewhere before Ray started; "
                "start Ray (ray.init or the sweep) first"
            )
        return (_from_ref, (self._ref,))


def _from_ref(ref: ray.ObjectRef) -> Parameter:
    param = Parameter.__new__(Parameter)
    param._value, param._ref = _NOTHING, ref
    return param


def _defer(param: Parameter) -> None:
    global _hook_registered
    with _pending_lock:
        _pending.append(param)
        if not _hook_registered:  # the hook Ray Tune's with_parameters uses for the same purpose
            ray._private.worker._post_init_hooks.append(_put_pending)
            _hook_registered = True


def _put_pending() -> None:
    with _pending_lock:
        pending, _pending[:] = list(_pending), []
    for param in pending:
        param.put()


def _bind(func: Callable[..., Any], params: Mapping[str, Parameter]) -> Callable[[dict[str, Any]], Any]:
    def trainable(config: dict[str, Any]) -> Any:
        return func(config, **{key: param.get() for key, param in params.items()})

    trainable.__name__ = getattr(func, "__name__", "with_parameters")
    trainable.__module__ = getattr(func, "__module__", None) or __name__
    trainable.__doc__ = getattr(func, "__doc__", None)
    trainable._tune_parameters = dict(params)  # type: ignore[attr-defined]  # a function attribute, which mypy does not model
    return trainable


def _check_trainable(trainable: Any, what: str) -> None:
    if not callable(trainable) or (inspect.isclass(trainable) and not issubclass(trainable, Trainable)):
        raise ValueError(
            f"tune.{what} works with a function trainable or a tune.Trainable subclass, "
            f"got {type(trainable).__name__}"
        )


def with_parameters(trainable: Any, **kwargs: Any) -> Any:
    """``trainable`` with ``kwargs`` passed to every trial through Ray's object store.

    Each object is put in the object store once, not once per trial; a function trainable is then
    called as ``trainable(config, **kwargs)``, a Trainable class's ``setup(config, **kwargs)``.

    Example:
        >>> def train(config, data=None):                                  # doctest: +SKIP
        ...     tune.report({"score": float(data.mean()) * config["x"]})
        >>> tune.Tuner(tune.with_parameters(train, data=np.zeros(10**7)),  # doctest: +SKIP
        ...            param_space={"x": tune.uniform(0, 1)}).fit()
    """
    _check_trainable(trainable, "with_parameters()")
    params = {key: Parameter(value) for key, value in kwargs.items()}
    if not inspect.isclass(trainable):
        return _bind(trainable, params)
    if issubclass(trainable, FunctionTrainable):  # a function already wrapped (tune.with_resources)
        bound = _bind(trainable._func, params)
        return type(trainable.__name__, (trainable,), {"_func": staticmethod(bound), "__module__": trainable.__module__})
    assert issubclass(trainable, Trainable)  # _check_trainable let only Trainable subclasses through
    base = trainable

    def setup(self: Trainable, config: dict[str, Any]) -> None:
        base.setup(self, config, **{key: param.get() for key, param in params.items()})

    return type(base.__name__, (base,), {"setup": setup, "__module__": base.__module__, "_tune_parameters": params})


def with_resources(trainable: Any, resources: Any) -> type[Trainable]:
    """``trainable`` with the resources each of its trials reserves.

    ``resources``: a dict like ``{"cpu": 2, "gpu": 1}``, a list of placement-group bundles, a
    ``PlacementGroupFactory``, or a function of the trial's config returning one of those.
    """
    _check_trainable(trainable, "with_resources()")
    if callable(resources) and not isinstance(resources, PlacementGroupFactory):
        request: Callable[[Mapping[str, Any]], Any] = resources
    else:
        fixed = to_placement_group_factory(resources, field="with_resources: resources")
        request = lambda config: fixed  # noqa: E731
    cls = trainable if inspect.isclass(trainable) else wrap_function(trainable)

    def default_resource_request(klass: type, config: Mapping[str, Any]) -> Any:
        return request(config)

    return type(cls.__name__, (cls,), {
        "default_resource_request": classmethod(default_resource_request), "__module__": cls.__module__,
    })


__all__ = ["Parameter", "with_parameters", "with_resources"]
