"""The ``trainable`` of a spec: a registered name (``PPO``) or ``module:function`` / ``module:Class``.

A ``module:attribute`` is imported on purpose (the only code a spec can bring in), with the
current directory first on ``sys.path`` as pytest and uvicorn do, so ``examples.my_sweep:train``
works from the project root.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from tuner.cli.errors import SpecError

if TYPE_CHECKING:
    from tuner.trainable.trainable import Trainable

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ATTR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def cwd_on_path() -> None:
    """Put the current directory first on ``sys.path`` and on the ``PYTHONPATH`` that local Ray
    workers inherit, so a spec's ``module:function`` imports in the driver and in the trials."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if cwd not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd, *parts])


def _import_attribute(text: str, path: str) -> Any:
    module_name, _, attr = text.partition(":")
    if not _MODULE.match(module_name) or not _ATTR.match(attr):
        raise SpecError(path, f"expected a registered name (e.g. PPO) or 'module:function' / 'module:Class', "
                              f"got {text!r}")
    cwd_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise SpecError(path, f"cannot import module {module_name!r}: no module named {exc.name!r} "
                                  f"(looked in {os.getcwd()} and the installed packages)") from None
        raise SpecError(path, f"importing module {module_name!r} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise SpecError(path, f"importing module {module_name!r} raised {type(exc).__name__}: {exc}") from None
    if not hasattr(module, attr):
        raise SpecError(path, f"module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def resolve(text: Any, path: str = "trainable") -> tuple[Any, type[Trainable]]:
    """(the object the spec names, its Trainable class as tune.run will run it)."""
    from tuner.api import resolve_trainable
    from tuner.registry import get_trainable

    if not isinstance(text, str) or not text:
        raise SpecError(path, f"expected a registered name (e.g. PPO) or 'module:function', got {text!r}")
    if ":" in text:
        target = _import_attribute(text, path)
    else:
        try:
            target = get_trainable(text)
        except ValueError as exc:
            raise SpecError(path, str(exc)) from None
    try:
        return target, resolve_trainable(target)
    except ValueError as exc:
        raise SpecError(path, f"{text!r} is not a function or a tune.Trainable subclass ({exc})") from None
