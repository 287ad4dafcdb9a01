"""Store throughput and query latency: result rows written per second (SQLite, PostgreSQL), then
the time to answer the best trial and one trial's full curve on the database just written.

Writes go through the public Store API the way the controller makes them: per trial, ``add_trial``
with the searcher's state in one ``store.batch()``, then ``update_trial(status="RUNNING")``;
``--concurrent`` trials run at once and each turn of the loop hands their new rows to
``add_results`` in one call; a finished trial gets ``update_trial(status="TERMINATED",
last_result=...)``; one ``flush()`` at the end. Results are realistic dicts: the 7 keys the
engine adds, 5 of an RL trainer and a nested ``info/learner`` dict (15 values). rows/s is
rows / (first write to the end of the flush); the time to build the dicts is in it (printed on
its own too).

Baselines in the same run, same rows (those of the first ``--baseline-trials`` trials, 2,000 by
default, to keep the run within a few minutes; rates per row compare), same tables, same pragmas:
plain ``sqlite3`` ``executemany`` of the JSON rows, dicts built and encoded in the same loop (the
ceiling of a SQLite writer that encodes JSON in Python), and for PostgreSQL a plain psycopg
``COPY`` into the results table. CPU seconds of this process are printed next to the wall-clock
rates: on a shared machine they say more than the wall clock.

Queries, on a store opened afresh on the written database, first call and median of 5:
``Store.best_trial(experiment, metric, "max")`` for the sweep's own metric (an index lookup on
``trials.metric_value``), the same answer the naive way (every trial's last result decoded in
Python, as ``store.trials()`` gives), ``best_trial`` for another top-level and another nested
metric (the JSON read in SQL), and ``Store.results(experiment, trial_id)`` (one trial's full
curve, a different trial at each call). Targets (issue 5): at least 20k rows/s into SQLite, queries under 100 ms (the sweep's
metric and the curve; the other metrics are printed, not held to it).

    python benchmarks/store.py                                   # 10k trials x 100 results
    python benchmarks/store.py --trials 1000 --results 50 --backends sqlite
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from tuner.store import Store, mask_url  # noqa: E402
from tuner.store.schema import metadata  # noqa: E402

PG_URL = os.environ.get("TUNER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
METRIC, OTHER_METRIC, NESTED_METRIC = "episode_return_mean", "episode_len_mean", "info/learner/entropy"
WRITE_TARGET, QUERY_TARGET_MS = 20_000, 100.0


# ------------------------------------------------------------------------------ the workload


def trial_id_of(i: int) -> str:
    return f"bench_{i:05d}"


def config_of(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    return {"lr": 10 ** rng.uniform(-5, -2), "gamma": rng.choice([0.95, 0.99, 0.999]),
            "num_layers": rng.randint(1, 4), "hidden": rng.choice([64, 128, 256])}


def make_result(i: int, it: int, rng: random.Random, start: float) -> dict[str, Any]:
    """A result as a PPO trial reports it, with the keys the engine adds."""
    ret = 500.0 * (1 - math.exp(-it / (10 + i % 50))) + rng.gauss(0.0, 5.0)
    return {
        "episode_return_mean": ret,
        "episode_return_min": ret - 40.0 * rng.random(),
        "episode_return_max": ret + 40.0 * rng.random(),
        "episode_len_mean": 200.0 + rng.random(),
        "num_env_steps_sampled": 4000 * it,
        "info": {"learner": {"policy_loss": -0.01 * rng.random(), "vf_loss": 10.0 * rng.random(),
                             "entropy": 0.7 - 0.001 * it + 0.01 * rng.random(), "kl": 0.02 * rng.random()}},
        "done": False,
        "training_iteration": it,
        "time_this_iter_s": 0.5 + 0.01 * rng.random(),
        "time_total_s": 0.51 * it,
        "timestamp": start + it * 0.51,
        "trial_id": trial_id_of(i),
        "iterations_since_restore": it,
    }


def workload(n_trials: int, n_results: int, concurrent: int) -> Iterator[tuple[str, Any]]:
    """The controller's store calls, in order: ("start", i), ("rows", [(tid, it, result)]),
    ("end", (i, last_result))."""
    rng = random.Random(0)
    start = 1_700_000_000.0
    for first in range(0, n_trials, concurrent):
        wave = range(first, min(first + concurrent, n_trials))
        for i in wave:
            yield "start", i
        last: dict[int, dict] = {}
        for it in range(1, n_results + 1):
            rows = []
            for i in wave:
                r = last[i] = make_result(i, it, rng, start)
                rows.append((trial_id_of(i), it, r))
            yield "rows", rows
        for i in wave:
            last[i]["done"] = True
            yield "end", (i, last[i])


def generation_time(args: argparse.Namespace) -> float:
    """Seconds to build all the result dicts (timed on up to 1,000 trials, scaled)."""
    n = min(args.trials, 1000)
    t0 = time.perf_counter()
    for _ in workload(n, args.results, args.concurrent):
        pass
    return (time.perf_counter() - t0) * args.trials / n


def load() -> str:
    try:
        return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "load average unknown"


# ---------------------------------------------------------------------------------- the store


def write_through_store(url: str, args: argparse.Namespace) -> tuple[int, float, float]:
    """Returns (experiment id, seconds until the last call returned, seconds until flushed)."""
    state = os.urandom(args.state_bytes)
    with Store(url) as store:
        eid = store.get_or_create_experiment(
            "bench", spec={"trials": args.trials, "results": args.results}, metric=METRIC, mode="max"
        )
        t0 = time.perf_counter()
        for kind, payload in workload(args.trials, args.results, args.concurrent):
            if kind == "rows":
                store.add_results(eid, payload)
            elif kind == "start":
                with store.batch():  # the trial and the searcher state that made it land together
                    store.add_trial(eid, trial_id_of(payload), payload, config_of(payload), "PENDING")
                    store.save_state(eid, "searcher", state)
                store.update_trial(trial_id_of(payload), status="RUNNING")
            else:
                i, last = payload
                store.update_trial(trial_id_of(i), status="TERMINATED", last_result=last)
        t_calls = time.perf_counter() - t0
        store.flush()
        t_flushed = time.perf_counter() - t0
    return eid, t_calls, t_flushed


def timed(fn: Callable[[int], Any], repeat: int = 5) -> tuple[float, float, Any]:
    """(first call ms, median of the next ``repeat`` ms, first answer); ``fn(k)`` is call k."""
    t0 = time.perf_counter()
    answer = fn(0)
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for k in range(1, repeat + 1):
        t0 = time.perf_counter()
        fn(k)
        times.append((time.perf_counter() - t0) * 1e3)
    return first, statistics.median(times), answer


def naive_best(store: Store, eid: int, metric: str) -> str | None:
    """The best trial the naive way: decode every trial's last result in Python."""
    best, best_v = None, None
    for t in store.trials(eid):
        v: Any = t["last_result"] or {}
        for part in metric.split("/"):
            v = v.get(part) if isinstance(v, dict) else None
        if isinstance(v, (int, float)) and math.isfinite(v) and (best_v is None or v > best_v):
            best, best_v = t["trial_id"], v
    return best


def queries(url: str, eid: int, args: argparse.Namespace) -> list[tuple[str, float, float, bool]]:
    """(label, first ms, median ms, counts for the target)."""
    out = []
    with Store(url, create=False) as store:

        def curve(k: int) -> list:  # a different trial each call: its rows are not cached yet
            return store.results(eid, trial_id_of((args.trials // 2 + k * 997) % args.trials))

        for label, fn, target in (
            (f"best trial, the sweep's metric ({METRIC})", lambda k: store.best_trial(eid, METRIC, "max"), True),
            (f"best trial, another metric ({OTHER_METRIC})",
             lambda k: store.best_trial(eid, OTHER_METRIC, "max"), False),
            (f"best trial, another nested one ({NESTED_METRIC})",
             lambda k: store.best_trial(eid, NESTED_METRIC, "max"), False),
            ("one trial's full curve (results; another trial each call)", curve, True),
        ):
            first, median, answer = timed(fn)
            out.append((label, first, median, target))
            if label.startswith("one"):
                assert len(answer) == args.results, len(answer)
            elif METRIC in label:
                first_n, median_n, naive = timed(lambda k: naive_best(store, eid, METRIC), repeat=1)
                assert naive == answer["trial_id"], (naive, answer["trial_id"])
                out.append(("  the naive way: decode every last_result", first_n, median_n, False))
    return out


# ------------------------------------------------------------------------------------ baselines


def baseline_trials(args: argparse.Namespace) -> int:
    return min(args.trials, args.baseline_trials) if args.baseline_trials > 0 else args.trials


def _rows_for_baseline(args: argparse.Namespace, eid: int) -> Iterator[list[tuple]]:
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    for kind, payload in workload(baseline_trials(args), args.results, args.concurrent):
        if kind == "rows":
            yield [(eid, tid, it, r["timestamp"], dumps(r)) for tid, it, r in payload]


def sqlite_baseline(path: Path, args: argparse.Namespace) -> float:
    """Seconds for plain sqlite3 to write the same trials and rows (dicts built and encoded too)."""
    engine = sa.create_engine(f"sqlite:///{path}")
    metadata.create_all(engine)
    engine.dispose()
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA foreign_keys=ON")
    con.execute("INSERT INTO experiments (name, spec, status, created_at, updated_at) VALUES ('b', '{}', 'R', 0, 0)")
    t0 = time.perf_counter()
    con.execute("BEGIN")
    con.executemany(
        "INSERT INTO trials (trial_id, experiment_id, trial_index, config, status, num_failures, created_at, "
        "updated_at) VALUES (?, 1, ?, ?, 'RUNNING', 0, 0, 0)",
        [(trial_id_of(i), i, json.dumps(config_of(i))) for i in range(baseline_trials(args))],
    )
    sql = ("INSERT INTO results (experiment_id, trial_id, iteration, timestamp, data) VALUES (?, ?, ?, ?, ?) "
           "ON CONFLICT (trial_id, iteration) DO NOTHING")
    pending = 0
    for rows in _rows_for_baseline(args, 1):
        con.executemany(sql, rows)
        pending += len(rows)
        if pending >= 50_000:
            con.execute("COMMIT")
            con.execute("BEGIN")
            pending = 0
    con.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    con.close()
    return elapsed


def postgres_baseline(url: str, args: argparse.Namespace) -> float:
    """Seconds for plain psycopg COPY to write the same trials and rows into fresh tables."""
    import psycopg

    engine = sa.create_engine(url)
    metadata.drop_all(engine)
    metadata.create_all(engine)
    engine.dispose()
    u = sa.make_url(url)
    dsn = u.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as con:
        con.execute("INSERT INTO experiments (name, spec, status, created_at, updated_at) VALUES ('b', '{}', 'R', 0, 0)")
        eid = con.execute("SELECT id FROM experiments").fetchone()[0]
        con.commit()
        t0 = time.perf_counter()
        with con.cursor() as cur, cur.copy(
            "COPY trials (trial_id, experiment_id, trial_index, config, status, num_failures, created_at, "
            "updated_at) FROM STDIN"
        ) as copy:
            for i in range(baseline_trials(args)):
                copy.write_row((trial_id_of(i), eid, i, json.dumps(config_of(i)), "RUNNING", 0, 0.0, 0.0))
        con.commit()
        pending, cur, copy_cm, copy = 0, None, None, None
        cols = "experiment_id, trial_id, iteration, timestamp, data"
        for rows in _rows_for_baseline(args, eid):
            if copy is None:
                cur = con.cursor()
                copy_cm = cur.copy(f"COPY results ({cols}) FROM STDIN")
                copy = copy_cm.__enter__()
            for r in rows:
                copy.write_row(r)
            pending += len(rows)
            if pending >= 50_000:
                copy_cm.__exit__(None, None, None)
                cur.close()
                con.commit()
                copy, pending = None, 0
        if copy is not None:
            copy_cm.__exit__(None, None, None)
            cur.close()
        con.commit()
        return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------ main


def run_backend(name: str, url: str, args: argparse.Namespace, baseline: Callable[[], float]) -> bool:
    n_rows = args.trials * args.results
    print(f"\n== {name}: {mask_url(url)} ({load()})")
    cpu = time.process_time()
    eid, t_calls, t_total = write_through_store(url, args)
    cpu = time.process_time() - cpu
    rate = n_rows / t_total
    print(f"Store:    {n_rows:,} rows in {t_total:6.1f} s = {rate:9,.0f} rows/s, {cpu:6.1f} s of CPU in this "
          f"process (the caller's calls returned after {t_calls:.1f} s; then the flush)")
    ok = True
    if name == "sqlite":
        ok &= rate >= WRITE_TARGET
        print(f"          target >= {WRITE_TARGET:,} rows/s: {'met' if rate >= WRITE_TARGET else 'MISSED'}")
    if not args.no_baseline:
        cpu_base = time.process_time()
        t_base = baseline()
        cpu_base = time.process_time() - cpu_base
        n_base = baseline_trials(args) * args.results
        base_rate = n_base / t_base
        print(f"Baseline: {n_base:,} rows in {t_base:6.1f} s = {base_rate:9,.0f} rows/s, {cpu_base:6.1f} s of CPU in this "
              f"process ({'plain sqlite3 executemany' if name == 'sqlite' else 'plain psycopg COPY'}); "
              f"store / baseline = {rate / base_rate:.2f} (rows/s), "
              f"{(cpu_base / n_base) / (cpu / n_rows):.2f} (rows per CPU second)")
    print(f"Queries on {args.trials:,} trials x {args.results} results, a store opened afresh "
          f"(first call / median of 5, ms; target < {QUERY_TARGET_MS:.0f}, * = not a target):")
    for label, first, median, target in queries(url, eid, args):
        met = max(first, median) < QUERY_TARGET_MS
        if target:
            ok &= met
        note = "" if not target else ("" if met else "  MISSED")
        print(f"  {label:<58} {first:8.1f} / {median:8.1f}{note}{'' if target else '  *'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10_000)
    p.add_argument("--results", type=int, default=100, help="results per trial")
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    p.add_argument("--concurrent", type=int, default=16,
                   help="trials running at once: the rows of one loop turn go to add_results together")
    p.add_argument("--state-bytes", type=int, default=2048, help="searcher state saved with each new trial")
    p.add_argument("--postgres-url", default=PG_URL)
    p.add_argument("--baseline-trials", type=int, default=2000,
                   help="the baselines write the rows of this many trials (0: all), to keep the run short")
    p.add_argument("--no-baseline", action="store_true")
    args = p.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - {"sqlite", "postgres"}:
        p.error(f"unknown backends {sorted(unknown)}")

    print(f"tuner store benchmark: {args.trials:,} trials x {args.results} results = "
          f"{args.trials * args.results:,} rows, {args.concurrent} trials at once, "
          f"SQLite {sqlite3.sqlite_version}, SQLAlchemy {sa.__version__}, {os.cpu_count()} CPUs, {load()}")
    print(f"building the result dicts alone takes {generation_time(args):.1f} s (included in every time below)")
    ok = True
    if "sqlite" in backends:
        with tempfile.TemporaryDirectory(prefix="tuner-bench-") as d:
            ok &= run_backend("sqlite", f"sqlite:///{d}/tuner.db", args,
                              lambda: sqlite_baseline(Path(d) / "baseline.db", args))
    if "postgres" in backends:
        schema = f"tuner_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(args.postgres_url)
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        base_schema = schema + "_base"
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{base_schema}"'))

        def in_schema(name: str) -> str:
            u = sa.make_url(args.postgres_url).update_query_dict({"options": f"-csearch_path={name}"})
            return u.render_as_string(hide_password=False)

        try:
            ok &= run_backend("postgres", in_schema(schema), args,
                              lambda: postgres_baseline(in_schema(base_schema), args))
        finally:
            with admin.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                conn.execute(sa.text(f'DROP SCHEMA "{base_schema}" CASCADE'))
            admin.dispose()
    print(f"\n{load()}")
    print("all targets met" if ok else "some targets MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
