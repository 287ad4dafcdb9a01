"""What a submitted sweep's driver needs that the cluster does not have: the spec, and the local
modules the spec names (``trainable: mymodule:train``, ``env: mymodule:MyEnv-v0``), shipped as the
job's working directory; and this package's own code, so the cluster runs the version that
checked the spec."""

from __future__ import annotations

import importlib.util
import io
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["OWN_PACKAGES", "local_modules", "module_references", "own_package_dirs", "pack_modules", "unpack_modules",
           "working_dir"]

#: "module:attribute" or "package.module:Env-v0" (a function, class, or a gymnasium id after its module).
_REFERENCE = re.compile(r"^([A-Za-z_]\w*)(\.[A-Za-z_]\w*)*:[A-Za-z_][\w.\-]*$")
#: This distribution's packages (see pyproject.toml), shipped as the job's py_modules.
OWN_PACKAGES = ("tuner", "schedulers", "algorithms")


def module_references(document: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(key path, top-level module) of every string in the spec that names ``module:attribute``."""
    if isinstance(document, Mapping):
        for key, value in document.items():
            yield from module_references(value, f"{path}.{key}" if path else str(key))
    elif isinstance(document, (list, tuple)):
        for i, value in enumerate(document):
            yield from module_references(value, f"{path}[{i}]")
    elif isinstance(document, str):
        match = _REFERENCE.match(document)
        if match:
            yield path, match.group(1)


def local_modules(document: Mapping[str, Any], cwd: Path, also: Path | None = None) -> dict[str, Path]:
    """The top-level modules the spec names that live under ``cwd`` (module name -> its file or
    package directory), or under ``also`` (a folder of modules kept in the store, after ``cwd``).
    A module that is neither there nor installed is a ValueError naming the key."""
    from tuner.cli.trainables import cwd_on_path

    if also is not None and str(also) not in sys.path:
        sys.path.append(str(also))
    cwd_on_path()
    found: dict[str, Path] = {}
    for key, name in module_references(document):
        if name in found or name in OWN_PACKAGES:  # OWN_PACKAGES go as py_modules
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise ValueError(f"{key}: names module {name!r}, which is neither in {cwd} nor installed: run "
                             f"`tuner submit` from the directory that holds it")
        where = _module_path(spec)
        if where is not None and any(where.is_relative_to(root) for root in (cwd, also) if root is not None):
            found[name] = where
    return found


def pack_modules(modules: Mapping[str, Path]) -> bytes:
    """``modules`` (files and package directories) as one zip, to be kept in a sweep's store."""
    with tempfile.TemporaryDirectory(prefix="tuner-modules-") as tmp:
        _copy_modules(modules, Path(tmp))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(tmp).rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(tmp).as_posix())
        return buffer.getvalue()


def unpack_modules(blob: bytes, root: Path) -> None:
    """Write the modules :func:`pack_modules` packed into the folder ``root``."""
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        for member in archive.namelist():  # our own archive, but never a path out of root
            if member.startswith("/") or ".." in Path(member).parts:
                raise ValueError(f"a kept module's path leaves its folder: {member!r}")
        archive.extractall(root)


def _module_path(spec: Any) -> Path | None:
    if spec.submodule_search_locations:  # a package: its directory
        locations = list(spec.submodule_search_locations)
        return Path(locations[0]).resolve() if locations else None
    return Path(spec.origin).resolve() if spec.origin and spec.origin not in ("built-in", "frozen") else None


def own_package_dirs() -> list[str]:
    """The directories of this distribution's packages, as the job's py_modules."""
    out = []
    for name in OWN_PACKAGES:
        spec = importlib.util.find_spec(name)
        where = _module_path(spec) if spec is not None else None
        if where is not None:
            out.append(str(where))
    return out


def working_dir(spec_text: str, modules: Mapping[str, Path]) -> Path:
    """A new temporary directory holding ``sweep.yaml`` and copies of ``modules`` (the caller
    removes it once the job is submitted: Ray uploads it at submission)."""
    root = Path(tempfile.mkdtemp(prefix="tuner-submit-"))
    (root / "sweep.yaml").write_text(spec_text, encoding="utf-8")
    _copy_modules(modules, root)
    return root


def _copy_modules(modules: Mapping[str, Path], root: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")
    for source in modules.values():
        if source.is_dir():
            shutil.copytree(source, root / source.name, ignore=ignore)
        else:
            shutil.copy2(source, root / source.name)
