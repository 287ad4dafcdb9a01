"""A sweep folder copied or moved (`cp -r results/a results/b`) works under its new name: listed,
queried and loaded as `b`, and `tuner resume b` continues it in b's own directory, from b's
checkpoints, leaving `a` as it was."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.tuner.cli.conftest import cli, cli_popen, query_rows
from tuner import tune

pytestmark = pytest.mark.usefixtures("ray_session")

ITERATIONS = 4
SPEC = f"""\
trainable: tests.tuner.cli.cli_trainables:checkpointed
metric: score
mode: max
num_samples: 2
seed: 0
resources: {{cpu: 0.5}}
max_concurrent_trials: 2
config:
  x: {{uniform: [0, 1]}}
  iterations: {ITERATIONS}
  sleep: 0.05
  hold_after: 1
"""


def _results(db: Path) -> int:
    try:
        return query_rows(db, "SELECT COUNT(*) FROM results")[0][0]
    except Exception:  # noqa: BLE001 - not created yet
        return 0


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _interrupted_sweep(tmp_path: Path, ray_address: str) -> tuple[Path, Path]:
    """Sweep `a` of 2 trials, each with one result and checkpoint, interrupted by Ctrl-C; and the
    file that lets its trials go on when it is resumed."""
    release = tmp_path / "release"
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + f"  release: {release}\n")
    storage = tmp_path / "results"
    proc = cli_popen("sweep", str(spec), "--name", "a", "--address", ray_address, "--storage-path", str(storage))
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and _results(storage / "a" / "tuner.db") < 2:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    return storage, release


def _under(paths, root: Path) -> bool:
    return all(p is None or Path(p).is_relative_to(root) for p in paths)


def test_a_copied_sweep_folder_is_listed_queried_loaded_and_resumed_under_its_new_name(tmp_path, ray_address):
    storage, release = _interrupted_sweep(tmp_path, ray_address)
    a, b = storage / "a", storage / "b"
    shutil.copytree(a, b)
    before = _tree(a)

    listed = cli("ls", "--storage-path", str(storage))
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["a", "INTERRUPTED"], ["b", "INTERRUPTED"]]
    shown = cli("show", "b", "--storage-path", str(storage))
    assert shown.returncode == 0, shown.stderr
    assert f"run dir      {b}\n" in shown.stdout and f"tensorboard  {b / 'tensorboard'}\n" in shown.stdout
    assert cli("best", "b", "--storage-path", str(storage)).returncode == 0
    with tune.load(b) as analysis:
        trials = analysis.trials
        assert len(trials) == 2 and all(t.checkpoint_path for t in trials)
        assert _under([t.checkpoint_path for t in trials] + [t.trial_dir for t in trials], b)
        assert _under([c["path"] for c in analysis.checkpoints()], b)
        assert all(Path(t.checkpoint_path).is_dir() for t in trials)

    release.touch()
    resumed = cli("resume", "b", "--storage-path", str(storage), "--address", ray_address)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "sweep b (score, max): resumed" in resumed.stdout and "sweep b: 2 trials (2 TERMINATED)" in resumed.stdout

    db = b / "tuner.db"
    assert query_rows(db, "SELECT name, status FROM experiments") == [("b", "TERMINATED")]
    paths = query_rows(db, "SELECT trial_dir, checkpoint_path FROM trials UNION ALL SELECT path, NULL FROM checkpoints")
    assert _under([p for row in paths for p in row], b), paths
    # each trial went on from its checkpoint in b: every iteration stored exactly once
    per_trial = query_rows(db, "SELECT COUNT(*), MIN(iteration), MAX(iteration) FROM results GROUP BY trial_id")
    assert per_trial == [(ITERATIONS, 1, ITERATIONS)] * 2
    assert len(list(b.glob(f"checkpointed_*/checkpoint_{ITERATIONS:06d}"))) == 2
    assert _tree(a) == before  # the original was neither read into nor written
    assert query_rows(a / "tuner.db", "SELECT name, status FROM experiments") == [("a", "INTERRUPTED")]


def test_a_moved_sweep_folder_resumes_under_its_new_name(tmp_path, ray_address):
    storage, release = _interrupted_sweep(tmp_path, ray_address)
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(storage / "a", moved)
    release.touch()
    resumed = cli("resume", str(moved), "--address", ray_address)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "sweep renamed: 2 trials (2 TERMINATED)" in resumed.stdout
    per_trial = query_rows(moved / "tuner.db", "SELECT COUNT(*), MIN(iteration), MAX(iteration) FROM results "
                                               "GROUP BY trial_id")
    assert per_trial == [(ITERATIONS, 1, ITERATIONS)] * 2
    assert not (storage / "a").exists()


def test_a_moved_folder_of_a_sweep_in_a_shared_database_says_why_it_is_not_found(tmp_path, ray_address,
                                                                                   postgres_url):
    spec = tmp_path / "spec.yaml"
    spec.write_text("trainable: tests.tuner.cli.cli_trainables:quadratic\nmetric: score\nmode: max\n"
                    "resources: {cpu: 0.5}\nconfig: {x: 0.5, iterations: 2}\n")
    storage = tmp_path / "results"
    done = cli("sweep", str(spec), "--name", "pg_a", "--address", ray_address, "--storage-path", str(storage),
               "--database-url", postgres_url)
    assert done.returncode == 0, done.stderr
    shutil.move(storage / "pg_a", storage / "pg_b")
    from tuner.store import mask_url

    expected = (f"tuner: error: no sweep named 'pg_b' in the store {mask_url(postgres_url)}: {storage / 'pg_b'} "
                f"holds sweep 'pg_a' (its sweep.yaml says so), moved or copied there; a sweep in a shared database "
                f"keeps its name, so name its folder 'pg_a' again\n")
    for verb in ("show", "best", "resume"):
        proc = cli(verb, "pg_b", "--storage-path", str(storage))
        assert (proc.returncode, proc.stderr) == (2, expected), verb
