"""A submitted sweep against the same sweep run on the head node: what `tuner submit` costs.

On a local cluster this script starts (`ray start --head` with its Jobs API and token auth, as the
tests start it), the same one-minute sweep (a function trainable, 4 trials x 120 steps of 0.25 s,
2 at a time: 60 s of sleeping; `cpu_share: 1.0` so both runs may use the whole cluster) runs in turn:

- head: `tuner sweep SPEC --address GCS`, a driver process on the head node joining the cluster;
- submitted: `tuner submit SPEC --address http://HEAD:PORT --wait`, the driver as a Ray Job.

For each run it prints the wall time from the command's start to its exit (the sweep's end), and
the latency from the command's start to the first result stored; then the medians, their spread,
and submitted / head. Runs alternate (head, submitted, head, ...) so that a loaded machine weighs
on both alike. The aim (issue 32): a submitted one-minute sweep within 10% of the head's.

    python benchmarks/submit.py                 # 3 runs each
    python benchmarks/submit.py --repeat 5 --steps 60      # a half-minute sweep
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.tuner.cli.cluster import start_cluster  # noqa: E402 - after the path above

TRAINABLE = '''\
import time
from tuner import tune


def train(config):
    for i in range(1, config["steps"] + 1):
        time.sleep(config["sleep"])
        tune.report({"score": config["x"] * i})
'''

SPEC = """\
trainable: benchtrain:train
metric: score
mode: max
resources: {{cpu: 1}}
max_concurrent_trials: 2
cpu_share: 1.0
config:
  x: {{grid_search: [1.0, 2.0, 3.0, 4.0]}}
  steps: {steps}
  sleep: {sleep}
"""


def first_result_at(db: Path) -> float | None:
    """The Unix time of the first stored result of the sweep in ``db``, or None."""
    if not db.exists():
        return None
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            value = conn.execute(sa.text("SELECT min(timestamp) FROM results")).scalar()
    except sa.exc.OperationalError:
        return None
    finally:
        engine.dispose()
    return None if value is None else float(value)


def run(kind: str, workdir: Path, storage: Path, name: str, cluster) -> tuple[float, float]:
    """(wall seconds to the end, seconds to the first stored result) of one run."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TUNER_DATABASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    common = ["spec.yaml", "--name", name, "--storage-path", str(storage), "--progress", "none"]
    if kind == "head":
        command = ["sweep", *common, "--address", cluster.gcs_address]
    else:
        command = ["submit", *[c for c in common if c not in ("--progress", "none")], "--address", cluster.address,
                   "--wait"]
    started_wall = time.time()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", *command], cwd=workdir, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{kind} run failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    first = first_result_at(storage / name / "tuner.db")
    return wall, (first - started_wall) if first is not None else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--sleep", type=float, default=0.25)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tuner-bench-submit-"))
    workdir = tmp / "work"
    workdir.mkdir()
    (workdir / "benchtrain.py").write_text(TRAINABLE)
    (workdir / "spec.yaml").write_text(SPEC.format(steps=args.steps, sleep=args.sleep))
    ideal = 2 * args.steps * args.sleep  # 4 trials, 2 at a time
    print(f"the sweep: 4 trials x {args.steps} steps of {args.sleep} s, 2 at a time: {ideal:.0f} s of sleeping; "
          f"{os.cpu_count()} cores here; {args.repeat} runs each, alternating")
    from benchmarks.loopback import loopback_only

    loopback_only()  # the cluster's head and the drivers this script starts, on 127.0.0.1
    cluster = start_cluster(tmp, cpus=2)
    times: dict[str, list[tuple[float, float]]] = {"head": [], "submitted": []}
    try:
        for i in range(args.repeat):
            for kind in ("head", "submitted"):
                wall, first = run(kind, workdir, tmp / "results", f"{kind}{i}", cluster)
                times[kind].append((wall, first))
                print(f"  {kind:9s} run {i + 1}: {wall:6.1f} s to the end, first result after {first:5.1f} s",
                      flush=True)
    finally:
        left = cluster.stop()
        if left:
            print(f"processes outlived the cluster (killed): {left}")
    medians = {}
    for kind, rows in times.items():
        walls, firsts = [w for w, _ in rows], [f for _, f in rows]
        medians[kind] = statistics.median(walls)
        print(f"{kind:9s}: {medians[kind]:6.1f} s median to the end ({min(walls):.1f}-{max(walls):.1f}), "
              f"first result after {statistics.median(firsts):.1f} s ({min(firsts):.1f}-{max(firsts):.1f})")
    ratio = medians["submitted"] / medians["head"]
    print(f"submitted / head: {ratio:.3f} ({(ratio - 1) * 100:+.1f}%; aim: under +10%)")


if __name__ == "__main__":
    main()
