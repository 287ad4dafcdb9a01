"""``tuner submit``, ``tuner resume --submit``, ``tuner logs`` and ``tuner stop``: a sweep's driver
as a Ray Job on a cluster, followed and stopped from any machine that reaches the cluster and the
sweep's store.

The job runs ``tuner sweep`` (or ``tuner resume``) on the cluster with the spec and the local
modules it names in its working directory, this package's code as its ``py_modules``, and in its
environment the sweep's database URL, the job's id and address and who submitted it; the driver
records those in the store, beside its heartbeat, so ``tuner ls`` shows them and ``logs``/``stop``
find the job from the sweep's name alone.
"""

from __future__ import annotations

import argparse
import copy
import ipaddress
import os
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from schedulers.trial_status import ENDED
from tuner.cli import spec as spec_mod
from tuner.cli.errors import EXIT_BUSY, EXIT_FAILED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, CLIError
from tuner.cli.live import fmt
from tuner.cli.paths import (
    DATABASE_URL_ENV,
    SweepRef,
    first_line,
    locate,
    location_flags,
    read_saved_spec,
    remember_location,
)
from tuner.cli.yaml_io import dump
from tuner.sweep_status import SweepStatus
from tuner.storage.location import is_uri

#: The default share of the cluster's CPUs a submitted sweep may hold (its spec's cpu_share wins).
SUBMIT_CPU_SHARE = 0.5
#: Seconds Ray waits for a stopped job's driver to wind down before SIGKILL (Ray's default is 3).
STOP_WAIT_S = 60


def _jobs_url(address: str | None) -> str:
    """The Jobs API URL ``--address`` (or the environment) names; a bad one is a CLIError."""
    from tuner.cluster.jobs import jobs_address

    try:
        return jobs_address(address)
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None


def _jobs(address: str | None) -> Any:
    """The cluster's Jobs API; a bad or unreachable address is a CLIError."""
    from tuner.cluster.jobs import ClusterError, ClusterJobs

    url = _jobs_url(address)
    try:
        return ClusterJobs(url)
    except ClusterError as exc:
        raise CLIError(str(exc), EXIT_FAILED) from None


def _cluster_call(fn: Any, *args: Any) -> Any:
    from tuner.cluster.jobs import ClusterError

    try:
        return fn(*args)
    except ClusterError as exc:
        raise CLIError(str(exc), EXIT_FAILED) from None


def _on_this_machine(address: str) -> bool:
    """Whether the cluster's head (the Jobs API's host) is this machine, where a SQLite file is shared."""
    host = urlsplit(address).hostname or ""
    if host in ("localhost", socket.gethostname()):
        return True
    try:
        ips = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
        local = set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        return False
    return any(ipaddress.ip_address(ip.split("%")[0]).is_loopback or ip in local for ip in ips)


# -- checks before anything is submitted ----------------------------------------------------------
def _check_store(ref: SweepRef, address: str, *, resuming: bool) -> None:
    """A store both machines reach, and (for a new sweep) a name not taken there; for a resume the
    sweep must exist and not be running."""
    if _sqlite_file(ref) is not None and not _on_this_machine(address):
        raise CLIError(f"sweep {ref.name!r} would be stored in a SQLite file, which lives on one machine's disk: "
                       f"a sweep submitted to {address} needs a database both machines reach, e.g. "
                       f"--database-url postgresql+psycopg://USER@HOST/DB", EXIT_USAGE)
    experiment = _stored(ref)
    from tuner.execution.heartbeat import shown_status

    status = shown_status(experiment) if experiment is not None else None
    if experiment is not None and status in (SweepStatus.RUNNING, SweepStatus.SUBMITTED):
        job = f" as job {experiment['job_id']}" if experiment.get("job_id") else ""
        doing = "is running" if status == SweepStatus.RUNNING else "was submitted"
        raise CLIError(f"sweep {ref.name!r} {doing}{job} (started by {experiment.get('owner') or 'someone'}): "
                       f"`tuner stop {ref.name}{location_flags(ref)}` first", EXIT_BUSY)
    if experiment is not None and not resuming:
        raise CLIError(f"a sweep named {ref.name!r} already exists in {ref.url_for_display}; "
                       f"`tuner resume {ref.name}{location_flags(ref)} --submit` continues it, or pick another --name")
    if experiment is None and resuming:
        raise CLIError(f"no sweep named {ref.name!r} in {ref.url_for_display} to resume")


def _stored(ref: SweepRef) -> dict[str, Any] | None:
    """The sweep's experiment row, or None when its store holds no such sweep (or no tables yet)."""
    from tuner.store import NoSchemaError, Store, StoreError

    file = _sqlite_file(ref)
    if file is not None and not file.exists():  # made by the submission, as `tuner sweep` makes it
        return None
    try:
        store = Store(ref.url, create=False)
    except NoSchemaError:
        return None
    except (StoreError, ValueError) as exc:
        raise CLIError(first_line(exc, ref.url), EXIT_FAILED) from None
    try:
        return store.get_experiment(ref.name)
    except StoreError as exc:
        raise CLIError(first_line(exc, ref.url), EXIT_FAILED) from None
    finally:
        store.close()


def _sqlite_file(ref: SweepRef) -> Path | None:
    """The SQLite file that stores ``ref`` (None: another database)."""
    from sqlalchemy.engine import make_url

    from tuner.store.urls import sqlite_file

    return sqlite_file(make_url(ref.url))


def _absolute(database_url: str | None) -> str | None:
    """A SQLite URL with its file's absolute path: the job's driver runs in another directory."""
    if not database_url or not database_url.startswith("sqlite:///"):
        return database_url
    from sqlalchemy.engine import make_url

    from tuner.store.urls import sqlite_file

    file = sqlite_file(make_url(database_url))
    return database_url if file is None else f"sqlite:///{file}"


def _shipped_spec(spec: spec_mod.SweepSpec) -> dict[str, Any]:
    """The spec the job's driver runs: the checked document, its database URL in the job's
    environment instead (it may hold a password), a SQLite sweep's storage path pinned to this
    machine's (the head is this machine), and the cluster share of a submitted sweep."""
    document = copy.deepcopy(spec.document)
    document.pop("database_url", None)
    if spec.database_url is None:
        document["storage_path"] = str(Path(spec.storage_path).expanduser().absolute())
    document.setdefault("cpu_share", SUBMIT_CPU_SHARE)
    return document


# -- submitting -----------------------------------------------------------------------------------
def _submit(jobs: Any, ref: SweepRef, spec: spec_mod.SweepSpec, argv: list[str], kept: Path | None = None) -> str:
    """Submit ``tuner ARGV`` as the sweep's driver, with the spec and its local modules (from the
    current directory, else from ``kept``: those its store kept), once the sweep is recorded in its
    store as SUBMITTED (taken back if the submission fails); the job id."""
    from tuner.cli import submitted
    from tuner.cluster.shipping import local_modules, pack_modules
    from tuner.execution.heartbeat import owner

    document = _shipped_spec(spec)
    try:
        modules = local_modules(document, Path.cwd(), kept)
    except ValueError as exc:
        raise CLIError(f"spec key '{exc}", EXIT_USAGE) from None
    job_id = f"tuner-{ref.name}-{uuid.uuid4().hex[:8]}"
    before = submitted.record(ref, job_id=job_id, address=jobs.address, owner=owner(), document=spec.document,
                              metric=spec.metric, mode=spec.mode, planned_trials=_planned(spec),
                              modules=pack_modules(modules))
    try:
        return _submit_job(jobs, ref, document, modules, argv, job_id)
    except BaseException:
        submitted.take_back(ref, job_id, before)
        raise


def _planned(spec: spec_mod.SweepSpec) -> int | None:
    """How many trials the sweep will run, for `tuner ls` before its driver says so."""
    from tuner.search.setup import planned_trials
    from tuner.run_options import RunOptions

    try:
        return planned_trials(RunOptions(**spec.run_kwargs()))
    except (ValueError, TypeError):  # the driver says it, in its own words
        return None


def _submit_job(jobs: Any, ref: SweepRef, document: dict[str, Any], modules: Any, argv: list[str],
                job_id: str) -> str:
    from tuner.cluster.shipping import own_package_dirs, working_dir
    from tuner.execution.heartbeat import HEARTBEAT_ENV, owner

    env = {
        "TUNER_JOB_ID": job_id, "TUNER_JOB_ADDRESS": jobs.address, "TUNER_OWNER": owner(),
        "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_S), "PYTHONUNBUFFERED": "1",
    }
    if ref.database_url:
        env[DATABASE_URL_ENV] = ref.database_url
    if os.environ.get(HEARTBEAT_ENV):
        env[HEARTBEAT_ENV] = os.environ[HEARTBEAT_ENV]
    root = working_dir("# shipped by `tuner submit`\n" + dump(document), modules)
    try:
        runtime_env = {"working_dir": str(root), "py_modules": own_package_dirs(), "env_vars": env}
        entrypoint = " ".join(["python", "-m", "tuner.cli", *argv, "--progress", "plain"])
        return str(_cluster_call(lambda: jobs.submit(
            entrypoint=entrypoint, submission_id=job_id, runtime_env=runtime_env,
            metadata={"tuner_sweep": ref.name, "owner": owner()})))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _submitted(ref: SweepRef, job_id: str, address: str) -> None:
    where = location_flags(ref)
    print(f"submitted sweep {ref.name} as Ray Job {job_id} to {address}")
    print(f"  follow it:  tuner show {ref.name}{where}    tuner logs {ref.name}{where} -f")
    print(f"  stop it:    tuner stop {ref.name}{where}  (resumable: tuner resume {ref.name}{where} --submit)")


def cmd_submit(args: argparse.Namespace) -> int:
    """``tuner submit SPEC.yaml --address http://HEAD:8265``: run the sweep's driver on the cluster."""
    database_url = _absolute(args.database_url or os.environ.get(DATABASE_URL_ENV) or None)
    spec = spec_mod.load(args.spec, args.set or (), name=args.name, database_url=database_url,
                         storage_path=args.storage_path)
    ref = SweepRef(spec.name, spec.run_dir, spec.database_url)
    _check_store(ref, _jobs_url(args.address), resuming=False)
    jobs = _jobs(args.address)
    job_id = _submit(jobs, ref, spec, ["sweep", "sweep.yaml"])
    remember_location(ref)
    _submitted(ref, job_id, jobs.address)
    return follow(jobs, ref, job_id) if args.wait else EXIT_OK


def submit_resume(args: argparse.Namespace) -> int:
    """``tuner resume NAME --submit``: continue a stored sweep with its driver on the cluster (the
    one it was submitted to, unless ``--address`` names another), from any folder: the local
    modules its spec names come from the current directory, else from its store."""
    import tempfile

    from tuner.cli import stored_spec
    from tuner.cluster.shipping import local_modules, unpack_modules
    from tuner.execution.heartbeat import shown_status

    ref = locate(args.name, args.storage_path, args.database_url or os.environ.get(DATABASE_URL_ENV))
    document = read_saved_spec(ref.run_dir) or _stored_spec(ref)
    if document is None:
        raise CLIError(f"sweep {ref.name!r} has no saved spec (no {ref.spec_file} here and none in its store): "
                       f"it was not started by `tuner sweep` or `tuner submit`")
    document.update(name=ref.name, database_url=ref.database_url)
    if ref.database_url is None and not is_uri(document.get("storage_path")):
        document["storage_path"] = str(ref.run_dir.parent)
    stored = _stored(ref)
    if stored is not None and shown_status(stored) == SweepStatus.TERMINATED:
        finished = _finished_line(ref, stored, errored_only=args.errored_only)
        if finished is not None:
            print(finished)
            return EXIT_OK
    address = args.address or (stored or {}).get("job_address") or None
    with tempfile.TemporaryDirectory(prefix="tuner-kept-modules-") as folder:
        blob = stored_spec.load_modules(ref)
        kept = Path(folder) if blob else None
        if blob and kept is not None:
            unpack_modules(blob, kept)
            try:
                local_modules(document, Path.cwd(), kept)  # puts them on sys.path for the spec's check
            except ValueError as exc:
                raise CLIError(f"spec key '{exc}", EXIT_USAGE) from None
        spec = spec_mod.validate(document)
        _check_store(ref, _jobs_url(address), resuming=True)
        jobs = _jobs(address)
        argv = ["resume", ref.name, *(["--storage-path", str(ref.run_dir.parent)] if ref.database_url is None else []),
                *(["--errored-only"] if args.errored_only else [])]
        job_id = _submit(jobs, ref, spec, argv, kept)
    _submitted(ref, job_id, jobs.address)
    return follow(jobs, ref, job_id) if getattr(args, "wait", False) else EXIT_OK


def _finished_line(ref: SweepRef, experiment: dict[str, Any], *, errored_only: bool) -> str | None:
    """What to say of a finished sweep that a resume would not run again (None: its errored
    trials are to be retried)."""
    from tuner.store import Store

    with Store(ref.url, create=False) as store:
        statuses = [str(t["status"]) for t in store.trials(int(experiment["id"]))]
    errored = statuses.count("ERROR")
    if errored and errored_only:
        return None
    hint = (f"; `tuner resume {ref.name}{location_flags(ref)} --submit --errored-only` retries its {errored} "
            f"errored trial(s)") if errored else ""
    return f"sweep {ref.name} is finished ({len(statuses)} trials, TERMINATED): nothing to resume, nothing submitted{hint}"


def _stored_spec(ref: SweepRef) -> dict[str, Any] | None:
    """The spec `tuner sweep` kept in the store (for a machine without the run directory)."""
    from tuner.cli import stored_spec

    return stored_spec.load(ref)


# -- following ------------------------------------------------------------------------------------
def follow(jobs: Any, ref: SweepRef, job_id: str, *, poll_s: float = 0.5) -> int:
    """Print the sweep's progress from its store until its job ends (Ctrl-C detaches: the sweep
    goes on); the driver's exit code."""
    last = ""
    try:
        while True:
            state = _cluster_call(jobs.state, job_id)
            line = _progress_line(ref, state.status)
            if line != last:
                print(line, flush=True)
                last = line
            if state.ended:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        print(f"detached; sweep {ref.name} goes on as job {job_id}: `tuner logs {ref.name}{location_flags(ref)} -f` "
              f"follows it", file=sys.stderr)
        return EXIT_OK
    if state.status == "STOPPED":
        return EXIT_TERMINATED
    if state.exit_code is not None:
        return int(state.exit_code)
    if state.status != "SUCCEEDED":
        print(f"tuner: job {job_id} {state.status.lower()}: {state.message}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _progress_line(ref: SweepRef, job_status: str) -> str:
    """One line: the job's and the sweep's status, trials ended of all, the best so far."""
    from tuner.execution.heartbeat import shown_status
    from tuner.store import NoSchemaError, Store, StoreError

    try:
        store = Store(ref.url, create=False)
    except (NoSchemaError, StoreError):
        return f"job {job_status}: sweep {ref.name} not in its store yet"
    try:
        experiment = store.get_experiment(ref.name)
        if experiment is None:
            return f"job {job_status}: sweep {ref.name} not in its store yet"
        trials = store.trials(int(experiment["id"]))
        ended = sum(t["status"] in ENDED for t in trials)
        best = ""
        metric, mode = experiment.get("metric"), experiment.get("mode")
        if metric and mode:
            row = store.best_trial(int(experiment["id"]), metric, mode)
            best = f", best {metric}={fmt(row['metric_value'])} ({row['trial_id']})" if row else ""
        return f"job {job_status}: sweep {ref.name} {shown_status(experiment)}, {ended}/{len(trials)} trials ended{best}"
    except StoreError as exc:
        return f"job {job_status}: cannot read the store ({first_line(exc, ref.url)})"
    finally:
        store.close()


# -- logs and stop --------------------------------------------------------------------------------
def _job_of(args: argparse.Namespace) -> tuple[SweepRef, str, Any]:
    """(the sweep, its job id, the cluster's Jobs API) of a sweep submitted with `tuner submit`."""
    from tuner.cli.paths import stored_experiment

    ref = locate(args.name, args.storage_path, args.database_url or os.environ.get(DATABASE_URL_ENV))
    experiment = stored_experiment(ref)
    job_id = experiment.get("job_id")
    if not job_id:
        who = experiment.get("owner") or "its owner"
        raise CLIError(f"sweep {ref.name!r} was not submitted as a Ray Job (it was run by {who} with `tuner sweep`): "
                       f"its output went to that terminal, and Ctrl-C there stops it")
    return ref, str(job_id), _jobs(args.address or experiment.get("job_address"))


def cmd_logs(args: argparse.Namespace) -> int:
    """``tuner logs NAME [-f]``: the output of the sweep's driver job."""
    _, job_id, jobs = _job_of(args)
    if args.follow:
        try:
            _cluster_call(jobs.follow_logs, job_id, lambda chunk: print(chunk, end="", flush=True))
        except KeyboardInterrupt:
            return EXIT_OK
    else:
        print(_cluster_call(jobs.logs, job_id), end="")
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    """``tuner stop NAME``: stop the sweep's job; its driver gets SIGTERM and leaves it resumable."""
    from tuner.cli.submitted import settle_stopped

    ref, job_id, jobs = _job_of(args)
    if not _cluster_call(jobs.stop, job_id):
        print(f"job {job_id} of sweep {ref.name} had ended already ({_cluster_call(jobs.state, job_id).status})")
        settled = settle_stopped(ref, job_id)  # a job that ended before its driver took the sweep over
        if settled:
            print(settled)
        return EXIT_OK
    deadline = time.monotonic() + STOP_WAIT_S + 30
    state = _cluster_call(jobs.state, job_id)
    while not state.ended and time.monotonic() < deadline:
        time.sleep(0.5)
        state = _cluster_call(jobs.state, job_id)
    settled = settle_stopped(ref, job_id) if state.ended else None
    if settled:
        print(f"stopped job {job_id} ({state.status}); {settled}")
        return EXIT_OK
    stored = _stored(ref)
    status = stored.get("status") if stored else "?"
    print(f"stopped sweep {ref.name} (job {job_id} {state.status}); the sweep is {status}: "
          f"`tuner resume {ref.name}{location_flags(ref)} --submit` continues it")
    return EXIT_OK
