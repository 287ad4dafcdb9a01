"""The CLI under test: its verbs that read a sweep or talk to a cluster's Jobs API, and those
that run sweeps on the session's Ray, run in this process through the CLI's ``main``; the others
(another Ray, signals, exit paths) as ``python -m tuner.cli`` in a subprocess; and one real sweep
(run once per session) that every verb is run against."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

REAL_SPEC = """\
description: the sweep the verb tests query; trial 0 fails on purpose
trainable: tests.tuner.cli.cli_trainables:quadratic
metric: score
mode: max
num_samples: 5
seed: 3
search:
  type: random
  points_to_evaluate: [{x: 0.5, fail: true}]
scheduler: {type: asha, grace_period: 2, max_t: 6, reduction_factor: 2}
resources: {cpu: 0.5}
max_concurrent_trials: 2
config:
  x: {uniform: [0, 1]}
  fail: false
  iterations: 6
  sleep: 0.02
"""


#: The CLI's default storage path in these tests (never the user's ~/tuner_results: the index of
#: sweep locations lives there).
DEFAULT_STORAGE = tempfile.mkdtemp(prefix="tuner_cli_default_")


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout importable, no storage path or Ray
    address inherited (the default storage path is this session's own)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TUNER_STORAGE_PATH", "RAY_ADDRESS")}
    env["TUNER_STORAGE_PATH"] = DEFAULT_STORAGE
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


#: Verbs that only read the store and the sweep's files, or talk to a cluster's Jobs API over
#: HTTP: they run in this process (a subprocess costs a second of imports each, and tests poll them).
IN_PROCESS = frozenset({"ls", "show", "best", "export", "checkpoints", "logs", "stop"})
#: Verbs that run sweeps: in this process too when they would join this session's Ray (no
#: ``--address``, or its address); a test about signals or killed drivers uses :func:`cli_popen`.
RUNS_SWEEPS = frozenset({"sweep", "resume", "validate"})


def cli(*args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run ``tuner ARGS`` from the repository root (see :func:`cli_in`)."""
    return cli_in(ROOT, args, timeout=timeout, env=env)


def cli_in(cwd: Path, args: tuple[str, ...], timeout: float = 240, env: dict[str, str] | None = None,
           sweeps_here: bool = True) -> subprocess.CompletedProcess:
    """Run ``tuner ARGS`` from ``cwd``, as ``python -m tuner.cli`` in a subprocess or, for a verb of
    :data:`IN_PROCESS` (or, with ``sweeps_here``, of :data:`RUNS_SWEEPS` on this session's Ray),
    through ``tuner.cli.main`` here with the same environment; past ``timeout`` a subprocess is
    killed and comes back with returncode None and what it printed so far. A test whose sweeps
    import the user's module from ``cwd`` passes ``sweeps_here=False``: this process keeps a module
    it imported once, a user's next process would not."""
    env = env or {}
    if args and (args[0] in IN_PROCESS or (sweeps_here and args[0] in RUNS_SWEEPS and _joins_this_ray(args))):
        return _cli_here(args, env, cwd)
    command = [sys.executable, "-m", "tuner.cli", *args]
    try:
        return subprocess.run(command, cwd=cwd, env=cli_env(**env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        text = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr)]
        return subprocess.CompletedProcess(command, None, text[0], text[1] + f"\n[killed after {timeout} s]")


def _joins_this_ray(args: tuple[str, ...]) -> bool:
    """Whether ``tuner ARGS`` would run on this session's Ray: it is up, and the arguments name
    no other address."""
    import ray

    if not ray.is_initialized():
        return False
    address = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--address"), None)
    return address is None or address == ray.get_runtime_context().gcs_address


def _cli_here(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """``tuner ARGS`` through the CLI's ``main`` in this process: the subprocess's environment and
    working folder while it runs, its output captured."""
    from tuner.cli import main

    saved, before, environment = dict(os.environ), os.getcwd(), cli_env(**env)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(environment)
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(before)
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["tuner", *args], code, out.getvalue(), err.getvalue())


def query_rows(db: Path, sql: str) -> list:
    """The rows ``sql`` returns from the SQLite file ``db``."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).all()
    finally:
        engine.dispose()


def cli_popen(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", *args], cwd=ROOT, env=cli_env(**env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )


@dataclasses.dataclass
class RealSweep:
    storage: Path
    name: str
    spec: Path
    proc: subprocess.CompletedProcess

    @property
    def run_dir(self) -> Path:
        return self.storage / self.name


@pytest.fixture(scope="session")
def ray_address(ray_session) -> str:
    """The session Ray's address: CLI subprocesses join it instead of starting their own."""
    return ray_session.get_runtime_context().gcs_address


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory, ray_address) -> RealSweep:
    """One real `tuner sweep` run as a subprocess: 6 trials of a function trainable with ASHA,
    trial 0 failing (so the sweep exits 1)."""
    storage = tmp_path_factory.mktemp("cli_storage")
    spec = storage.parent / "real_sweep.yaml"
    spec.write_text(REAL_SPEC)
    proc = cli("sweep", str(spec), "--name", "real", "--address", ray_address, "--set", f"storage_path={storage}")
    return RealSweep(storage=storage, name="real", spec=spec, proc=proc)
