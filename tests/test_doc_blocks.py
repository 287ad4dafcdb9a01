"""Every code block of the README and the documentation site holds: the Python blocks run (a page's
blocks in order, in one process, as a reader pastes them), the shell blocks' commands parse (each
`tuner` command line by the CLI's own parser, `ray start` by Ray's, `make` targets and exported
variables exist), the YAML blocks load (a sweep spec passes the spec's validation, a RayJob's
entrypoint is a `tuner` command that parses). A block included from a file (``--8<--``) is that
file's, and the file's own test runs it.

A Python block may need something made before it that the page does not show (a finished sweep to
load an agent from): an HTML comment ``<!-- setup ... -->`` right before the block holds that code.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- setup[^\n]*\n(?P<setup>.*?)-->\n)?^```(?P<lang>\w*)\n(?P<code>.*?)^```", re.S | re.M)
#: What the shell blocks write for the reader to fill in, and what stands in for it here.
PLACEHOLDERS = {"SPEC.yaml": "examples/ppo_cartpole_asha.yaml", "NAME": "a_sweep", "HEAD": "127.0.0.1",
                "DIR": "out", "RAY": "127.0.0.1:6390", "URL": "sqlite:///x.db"}
#: Files a README block shows as they are (their tests run them).
SHOWN_FILES = [ROOT / "examples" / "ppo_sweep.py"]


def _blocks(lang: str) -> list[tuple[Path, str, str]]:
    """(page, code, setup) of every block of ``lang`` on every page."""
    found = []
    for page in PAGES:
        for match in BLOCK.finditer(page.read_text()):
            if match["lang"] == lang:
                found.append((page, match["code"], match["setup"] or ""))
    return found


def _shown_as_a_file(code: str) -> bool:
    """Whether the block is an example file: included (``--8<-- "file"``) or shown as it is."""
    if code.startswith("--8<--"):
        included = ROOT / shlex.split(code)[1]
        assert included in SHOWN_FILES, f"{included} is included in the docs: list it in SHOWN_FILES"
        return True
    return any(code.strip() in path.read_text() for path in SHOWN_FILES) and len(code.strip().splitlines()) > 5


def test_every_block_is_of_a_kind_checked_here():
    kinds = {match["lang"] for page in PAGES for match in BLOCK.finditer(page.read_text())}
    assert kinds <= {"python", "bash", "yaml"}, kinds
    assert len(_blocks("python")) >= 6 and len(_blocks("bash")) >= 5 and len(_blocks("yaml")) >= 2


# -- shell -------------------------------------------------------------------------------------------
def _commands(code: str) -> list[list[str]]:
    """The command lines of a shell block, comments gone, placeholders filled in."""
    commands: list[list[str]] = []
    for line in code.splitlines():
        current: list[str] = []
        for word in shlex.split(line, comments=True):
            ends = word.endswith(";")  # `tuner logs NAME -f; tuner stop NAME`
            current.append(_fill(word.rstrip(";")))
            if ends:
                commands.append(current)
                current = []
        if current:
            commands.append(current)
    return commands


def _fill(word: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        word = re.sub(rf"\b{re.escape(placeholder)}\b", value, word)
    return word


def _parses(argv: list[str]) -> str | None:
    """None when the CLI's parser takes ``argv``, else what it said."""
    import contextlib
    import io

    from tuner.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        return f"exit {exc.code}: {err.getvalue().strip()[-300:]}"
    return None


SHELL = [(page.name, command) for page, code, _ in _blocks("bash") for command in _commands(code)]


@pytest.mark.parametrize("page, command", SHELL, ids=[f"{p}: {' '.join(c)[:60]}" for p, c in SHELL])
def test_every_shell_command_on_the_pages_is_one_the_tools_take(page, command):
    program, args = command[0], command[1:]
    if program == "tuner":
        assert _parses(args) is None, (page, command, _parses(args))
    elif program == "make":
        targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M)
        assert set(args) <= set(targets), (page, command, targets)
    elif program == "ray":
        from ray.scripts.scripts import cli as ray_cli

        assert args[0] == "start", command
        ray_cli.commands["start"].make_context("start", args[1:])  # raises on a flag Ray does not have
    elif program == "export":
        name = args[0].split("=", 1)[0]
        sources = "".join(path.read_text() for path in (ROOT / "tuner").rglob("*.py"))
        assert f'"{name}"' in sources, f"{page}: {name} is read nowhere in tuner/"
    else:
        pytest.fail(f"{page}: a command this test does not know how to check: {command}")


# -- YAML -----------------------------------------------------------------------------------------
def _sub_mapping(part, whole) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _sub_mapping(v, whole[k]) for k, v in part.items())
    return part == whole


@pytest.mark.parametrize("page, code", [(p.name, c) for p, c, _ in _blocks("yaml")])
def test_every_yaml_block_loads_and_says_what_the_product_takes(page, code):
    from tuner.cli.yaml_io import SpecLoader

    document = yaml.load(code, Loader=SpecLoader)  # noqa: S506 - the spec's own safe loader
    if "trainable" in document:  # a sweep spec, abridged from the example its first line names
        from tuner.cli.spec import validate

        validate(document, default_name="docs")
        shown = re.match(r"# (examples/\S+\.yaml)", code)
        assert shown, f"{page}: a spec block names the example it comes from"
        assert _sub_mapping(document, yaml.load((ROOT / shown[1]).read_text(), Loader=SpecLoader)), shown[1]
    elif document.get("kind") == "RayJob":
        entrypoint = shlex.split(document["spec"]["entrypoint"])
        assert entrypoint[0] == "tuner" and _parses(entrypoint[1:]) is None, entrypoint
        assert "env_vars" in yaml.safe_load(document["spec"]["runtimeEnvYAML"])
    else:
        pytest.fail(f"{page}: a YAML block this test does not know how to check")


# -- Python ---------------------------------------------------------------------------------------
def _python_pages() -> list[tuple[str, str]]:
    """(page, script): each page's Python blocks (and their setups) in order, as one script."""
    scripts: dict[str, list[str]] = {}
    for page, code, setup in _blocks("python"):
        if _shown_as_a_file(code):
            continue
        scripts.setdefault(page.name, []).extend(part for part in (setup, code) if part)
    return sorted((name, "\n".join(parts)) for name, parts in scripts.items())


@pytest.mark.parametrize("page, script", _python_pages(), ids=[name for name, _ in _python_pages()])
def test_the_python_blocks_of_each_page_run_in_order(page, script, ray_session, tmp_path):
    # the session's home is a temporary folder (tests/conftest.py): ~/tuner_results is under it
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, f"{page}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_the_example_files_the_pages_show_are_run_by_their_own_tests():
    shown = [code for _, code, _ in _blocks("python") if _shown_as_a_file(code)]
    assert shown
    for path in SHOWN_FILES:
        assert list((ROOT / "tests" / "examples").glob(f"test_{path.stem}.py")), path
