"""The algorithms' folders keep their shape: one folder per algorithm and one per role; no trainer
imports another trainer's modules, the role folders import none of them, and no module of the
three packages takes part in an import cycle (lazy imports count). A trainer that is another's
variant builds on that one only (APPO on IMPALA, Ape-X on DQN, ARS on ES's perturbations)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "algorithms"
TRAINERS = ("a2c", "ppo", "impala", "appo", "dqn", "apex", "sac", "td3", "es", "ars")
ROLES = ("core", "sampling", "envs", "models", "data", "optim")
#: The trainer each variant builds on (RLlib's families), the one other trainer it may import.
BASES = {"appo": "impala", "apex": "dqn", "ars": "es"}


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


def test_every_module_is_in_an_algorithm_or_a_role_folder():
    loose = [p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"]
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert loose == [] and folders == sorted((*TRAINERS, *ROLES))


@pytest.mark.parametrize("folder", [*TRAINERS, *ROLES])
def test_a_folder_imports_no_other_trainer(folder):
    offending = {
        f"{path.relative_to(ROOT.parent)} imports {module}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for module in _imports(path)
        if _trainer_of(module) not in (None, folder, BASES.get(folder))
    }
    assert not offending, sorted(offending)


def test_the_checker_sees_an_import_of_another_trainer(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from algorithms.ppo.trainer import PPO\n    from algorithms import SAC\n")
    assert {_trainer_of(m) for m in _imports(probe)} == {None, "ppo", "sac"}


def _module_graph() -> dict[str, set[str]]:
    """Each module of algorithms/, schedulers/ and tuner/ and the modules of those packages it
    imports (``from package import submodule`` counts as the submodule; TYPE_CHECKING imports
    do not count: they never run)."""
    top = ROOT.parent
    files = {}
    for package in ("algorithms", "schedulers", "tuner"):
        for path in (top / package).rglob("*.py"):
            parts = path.relative_to(top).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                    for sub in node.body for n in ast.walk(sub)}
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in checking:
                continue
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{alias.name}" for alias in node.names]
                deps.update(s for s in subs if s in files)
                if any(s not in files for s in subs):
                    deps.add(node.module)
        graph[module] = {d for d in deps if d in files and d != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_in_the_packages():
    assert _cycles(_module_graph()) == []


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
