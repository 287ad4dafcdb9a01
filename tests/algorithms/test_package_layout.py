"""The algorithms' folders keep their shape: no trainer imports another trainer's modules, and
what the trainers share imports none of them (``algorithms/shared/__init__.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "algorithms"
TRAINERS = ("ppo", "dqn", "sac")


def _imports(path: Path) -> set[str]:
    """The modules a file imports, at its top or inside functions (lazy imports count too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _trainer_of(module: str) -> str | None:
    """The trainer a module belongs to (``algorithms.PPO``, the package's lazy export, is PPO's)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "algorithms":
        return None
    name = parts[1].lower()
    return name if name in TRAINERS else None


@pytest.mark.parametrize("folder", [*TRAINERS, "shared"])
def test_a_folder_imports_no_other_trainer(folder):
    offending = {
        f"{path.relative_to(ROOT.parent)} imports {module}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for module in _imports(path)
        if _trainer_of(module) not in (None, folder)
    }
    assert not offending, sorted(offending)


def test_the_checker_sees_an_import_of_another_trainer(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from algorithms.ppo.trainer import PPO\n    from algorithms import SAC\n")
    assert {_trainer_of(m) for m in _imports(probe)} == {None, "ppo", "sac"}
