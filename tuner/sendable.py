"""What a sweep sends to Ray's workers (the trainable, the values of its config) must pickle, and
pickle as itself: checked before anything is written, so that a trainable closing over a lock, or
an open file in a config, is one clear error naming it, not a failed sweep left in the store under
the name the corrected call wants, nor a file that silently becomes a StringIO copy in the trials."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import io
import pickle
import sys
from collections.abc import Mapping
from typing import Any, Iterator

import ray
from ray import cloudpickle

__all__ = ["OPEN_FILE", "Unpicklable", "check_config_values", "check_trainable_sendable", "find_unpicklable"]

#: Why an open file is refused (pickle "succeeds": cloudpickle sends a StringIO copy of its text).
OPEN_FILE = "an open file: the workers would get at best a copy of its contents, not the file"
_MAX_DEPTH = 6
# A class pickled by value carries its __dict__; these entries are Python's own.
_CLASS_OWN = frozenset({"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__", "__annotations__"})


@dataclasses.dataclass(frozen=True)
class Unpicklable:
    """The part of an object that cannot be pickled: its ``path`` from the object ('' for the
    object itself, else e.g. ``lock`` or ``state['lock']``), the value and pickle's reason."""

    path: str
    value: Any
    reason: str

    @property
    def type_name(self) -> str:
        kind = type(self.value)
        return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


class _Sink:
    """Where the probe writes: nowhere, so that a large closure costs no memory to check."""

    def write(self, data: bytes) -> int:
        return len(data)


class _Probe(cloudpickle.CloudPickler):
    """Ray's pickler, except that what travels by reference to Ray's object store
    (``tune.with_parameters``' objects, ObjectRefs, actor handles) is taken as it is: pickling
    those outside a Ray call would pin them, or fail before Ray has started."""

    def persistent_id(self, obj: Any) -> Any:
        from ray.actor import ActorHandle

        from tuner.trainable.util import Parameter

        if _is_open_file(obj):  # cloudpickle would send a StringIO copy of its text, silently
            raise pickle.PicklingError(OPEN_FILE)
        return id(obj) if isinstance(obj, (Parameter, ray.ObjectRef, ActorHandle)) else None


def _is_open_file(obj: Any) -> bool:
    """A file of the OS (not an in-memory buffer, nor the process's own stdout and stderr, which
    cloudpickle sends as the worker's own)."""
    return (isinstance(obj, io.IOBase) and not isinstance(obj, (io.StringIO, io.BytesIO))
            and not any(obj is stream for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)))


def _pickle_error(obj: Any) -> str | None:
    """Why ``obj`` cannot be pickled as Ray would pickle it (None when it can)."""
    try:
        _Probe(_Sink(), protocol=5).dump(obj)
    except Exception as exc:  # noqa: BLE001 - any failure to pickle is the answer
        return str(exc) or type(exc).__name__
    return None


def find_unpicklable(obj: Any) -> Unpicklable | None:
    """The innermost part of ``obj`` that cannot be pickled (a closure's variable, a global a
    function uses, a class attribute, a dict entry...), or None when ``obj`` pickles."""
    reason = _pickle_error(obj)
    if reason is None:
        return None
    return _narrow(obj, "", reason, depth=0, seen={id(obj)})


def _narrow(obj: Any, path: str, reason: str, depth: int, seen: set[int]) -> Unpicklable:
    if depth < _MAX_DEPTH:
        for step, part in _parts(obj):
            if id(part) in seen:
                continue
            seen.add(id(part))
            why = _pickle_error(part)
            if why is not None:
                return _narrow(part, _join(path, step), why, depth + 1, seen)
    return Unpicklable(path, obj, reason)


def _join(path: str, step: str) -> str:
    if not step:
        return path
    return f"{path}{step}" if step.startswith("[") or not path else f"{path}.{step}"


def _parts(obj: Any) -> Iterator[tuple[str, Any]]:
    """(step, part) of what pickling ``obj`` pickles too; a step is '' when the part stands for
    ``obj`` itself (the function of a staticmethod)."""
    if isinstance(obj, (staticmethod, classmethod)):
        yield "", obj.__func__
    elif inspect.ismethod(obj):
        yield "", obj.__func__
        yield "__self__", obj.__self__
    elif isinstance(obj, functools.partial):
        yield "", obj.func
        yield from ((f"[{i}]", arg) for i, arg in enumerate(obj.args))
        yield from ((f"[{key!r}]", value) for key, value in obj.keywords.items())
    elif inspect.isfunction(obj):
        try:
            variables = inspect.getclosurevars(obj)
        except (TypeError, ValueError):
            return
        yield from variables.nonlocals.items()
        yield from ((name, value) for name, value in variables.globals.items() if not inspect.ismodule(value))
        yield from ((f"[default {i}]", value) for i, value in enumerate(obj.__defaults__ or ()))
        yield from ((name, value) for name, value in (obj.__kwdefaults__ or {}).items())
    elif inspect.isclass(obj):
        yield from ((name, value) for name, value in vars(obj).items() if name not in _CLASS_OWN)
    elif isinstance(obj, Mapping):
        yield from ((f"[{key!r}]", value) for key, value in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from ((f"[{i}]", value) for i, value in enumerate(obj))
    elif hasattr(obj, "__dict__") and not inspect.ismodule(obj):
        yield from vars(obj).items()


def check_trainable_sendable(trainable_cls: type, given: Any) -> None:
    """Raise one ValueError naming what cannot be pickled when ``trainable_cls`` (made of
    ``given``, tune.run's ``run_or_experiment``) cannot be sent to Ray's workers."""
    found = find_unpicklable(trainable_cls)
    if found is None:
        return
    label = getattr(given, "__qualname__", None) or getattr(given, "__name__", None) or type(given).__name__
    path = found.path.removeprefix("_func.").removeprefix("_func")  # the wrapper of a function trainable
    if path:
        what = f"it uses {path}, a {found.type_name}, which cannot be pickled ({found.reason})"
    else:
        what = f"it cannot be pickled ({found.reason})"
    raise ValueError(
        f"run_or_experiment: {label} cannot be sent to Ray's workers: {what}; create such objects "
        f"inside the trainable instead"
    )


_PLAIN = (str, bytes, int, float, bool, complex, type(None))


def check_config_values(config: Mapping[str, Any]) -> None:
    """Raise one ValueError naming the key path (``config['env']['log']``) and the type of the
    first value of the search space that cannot be sent to the trials: an open file, a lock, a
    socket, a generator, anything else that does not pickle. Domains are looked into for their
    choices; ``sample_from`` functions run in the driver and are not sent."""
    for where, value in _leaves(config, "config"):
        if isinstance(value, _PLAIN):
            continue
        found = find_unpicklable(value)
        if found is None:
            continue
        if found.path:
            where += found.path if found.path.startswith("[") else f".{found.path}"
        if found.reason == OPEN_FILE:
            raise ValueError(f"{where}: a {found.type_name} (an open file) cannot be sent to the trials: each would "
                             f"get at best a copy of its contents, not the file; pass its path instead")
        raise ValueError(f"{where}: a {found.type_name} cannot be sent to the trials ({found.reason}); pass plain "
                         f"data, or what the trial can make it from")


def _leaves(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(key path, value) of every value a trial's config may hold."""
    from tuner.search.space import Categorical, Domain

    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _leaves(value, f"{path}[{key!r}]")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{path}[{i}]")
    elif isinstance(node, Categorical):
        yield from _leaves(node.categories, f"{path}.categories")
    elif not isinstance(node, Domain):
        yield path, node
