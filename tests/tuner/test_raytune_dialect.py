"""Scripts written in Ray Tune's dialect (tests/tuner/raytune_dialect) run here unchanged but for
their import lines, and what they ran is then checked in the store.

``python -m tests.tuner.test_raytune_dialect OUTDIR`` writes the Ray Tune versions of the scripts
(imports swapped) into OUTDIR, to run them on Ray Tune by hand: ``python OUTDIR/<script> STORAGE``.
"""

from __future__ import annotations

import ast
import os
import pickle
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import sqlalchemy as sa

from tests.conftest import ROOT
from tuner import tune

SCRIPTS = Path(__file__).parent / "raytune_dialect"
#: Our import line prefix -> Ray Tune's. The only lines in which a script may differ.
RAY_TUNE_IMPORTS = (
    ("from tuner import tune", "from ray import tune"),
    ("from tuner.tune import ", "from ray.tune import "),
    ("from schedulers import ", "from ray.tune.schedulers import "),
    ("from schedulers.resource_changing import ", "from ray.tune.schedulers.resource_changing_scheduler import "),
    ("from schedulers.pb2 import ", "from ray.tune.schedulers.pb2 import "),
    ("from tuner.search.optuna import ", "from ray.tune.search.optuna import "),
    ("from tuner.search import ", "from ray.tune.search import "),
)
SCRIPT_NAMES = ("function_checkpoints.py", "class_trainable.py", "asha_optuna.py", "restore.py", "repeater.py",
                "pbt_replay.py", "resource_changing.py", "pb2_function.py")


def ray_tune_version(source: str) -> str:
    """``source`` with its import lines swapped for Ray Tune's."""
    out = []
    for line in source.splitlines(keepends=True):
        for ours, theirs in RAY_TUNE_IMPORTS:
            if line.startswith(ours):
                line = theirs + line[len(ours):]
                break
        out.append(line)
    return "".join(out)


def _imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_script_differs_from_ray_tune_only_in_its_imports(script):
    source = (SCRIPTS / script).read_text()
    ported = ray_tune_version(source)
    changed = [(a, b) for a, b in zip(source.splitlines(), ported.splitlines()) if a != b]
    assert changed and all(a.startswith("from ") and b.startswith("from ray") for a, b in changed)
    roots = _imported_roots(ported)
    assert "ray" in roots and not roots & {"tuner", "schedulers", "algorithms"}, roots


# ------------------------------------------------------------------------------------ running them


def _run_script(name: str, storage: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a script as ``python SCRIPT STORAGE`` would, in this process (on the session's Ray)."""
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / name), str(storage)])
    runpy.run_path(str(SCRIPTS / name), run_name="__main__")


def _rows(db: Path, sql: str) -> list[tuple]:
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def _curves(analysis) -> dict[str, list[int]]:
    return {tid: list(df["training_iteration"]) for tid, df in analysis.trial_dataframes.items()}


@pytest.mark.usefixtures("ray_session")
def test_function_trainable_with_checkpoints(tmp_path, monkeypatch):
    _run_script("function_checkpoints.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "function_checkpoints") as analysis:
        trials = {t.config["lr"]: t for t in analysis.trials}
        assert sorted(trials) == [0.001, 0.01, 0.1]
        assert {t.status for t in trials.values()} == {"TERMINATED"}
        assert trials[0.1].num_failures == 1 and "lost the GPU at step 4" in trials[0.1].error
        # Every step stored once, the failed trial's too (it went on from its step-3 checkpoint).
        assert all(curve == list(range(1, 9)) for curve in _curves(analysis).values())
        failed = analysis.trial_dataframes[trials[0.1].trial_id]
        assert list(failed["step"]) == list(range(8))
        for trial in trials.values():  # num_to_keep=2 by loss (min): the last two steps stay
            kept = analysis.checkpoints(trial.trial_id)
            assert [c["metrics"]["step"] for c in kept] == [6, 7]
            on_disk = sorted(p.name for p in Path(trial.trial_dir).iterdir() if p.name.startswith("checkpoint_"))
            assert on_disk == ["checkpoint_000007", "checkpoint_000008"]
            deleted = [c for c in analysis.checkpoints(trial.trial_id, include_deleted=True) if c["deleted"]]
            assert len(deleted) >= 6 and not any(os.path.exists(c["path"]) for c in deleted)
        assert analysis.get_best_config("loss", "min") == {"lr": 0.01}


@pytest.mark.usefixtures("ray_session")
def test_class_trainable(tmp_path, monkeypatch):
    _run_script("class_trainable.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "class_trainable") as analysis:
        assert len(analysis.trials) == 3 and {t.status for t in analysis.trials} == {"TERMINATED"}
        assert all(curve == list(range(1, 7)) for curve in _curves(analysis).values())
        for trial in analysis.trials:  # checkpoint_frequency=2, and at the end (iteration 6, already taken)
            assert [c["iteration"] for c in analysis.checkpoints(trial.trial_id)] == [2, 4, 6]
            assert trial.checkpoint_path.endswith("checkpoint_000006")
        spec = analysis.spec
        assert (spec["trainable"], spec["checkpoint_freq"], spec["checkpoint_at_end"]) == ("Quadratic", 2, True)
        assert analysis.get_best_config("loss", "min") == {"lr": 0.9}


@pytest.mark.usefixtures("ray_session")
def test_tuner_with_asha_and_optuna(tmp_path, monkeypatch):
    _run_script("asha_optuna.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "asha_optuna") as analysis:
        trials = analysis.trials
        assert len(trials) == 10 and {t.status for t in trials} == {"TERMINATED"}
        lengths = [len(c) for c in _curves(analysis).values()]
        assert max(lengths) == 10 and min(lengths) < 10  # ASHA stopped some trials early
        assert all(0 <= t.config["width"] < 20 and t.config["activation"] in ("relu", "tanh") for t in trials)
        assert analysis.spec["search_alg"] == "OptunaSearch" and analysis.spec["scheduler"] == "ASHAScheduler"
        db = Path(analysis.experiment_path) / "tuner.db"
        assert {k for (k,) in _rows(db, "SELECT key FROM experiment_state")} >= {"scheduler", "searcher", "tuner"}


@pytest.mark.usefixtures("ray_session")
def test_resource_changing_scheduler(tmp_path, monkeypatch):
    _run_script("resource_changing.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "resource_changing") as analysis:
        frames = {t.config["lr"]: analysis.trial_dataframes[t.trial_id] for t in analysis.trials}
        assert {t.status for t in analysis.trials} == {"TERMINATED"}
        ends = {lr: df["timestamp"].max() for lr, df in frames.items()}
        stopped = [lr for lr, df in frames.items() if df["training_iteration"].max() < 20]
        assert stopped, "ASHA stopped no trial"
        best = frames[0.9]
        assert list(best["training_iteration"]) == list(range(1, 21))  # restarts leave no gap, no repeat
        assert best["cpus"].iloc[0] == 0.5 and best["cpus"].max() > 0.5  # it got the stopped trials' CPUs
        grown_at = best.loc[best["cpus"] > 0.5, "timestamp"].min()
        assert any(ends[lr] < grown_at for lr in stopped)  # only once they were free
        # Ray Tune's way for a trainable that takes no resources in place: restarted from its checkpoint
        restarted = best[best["cpus"] > 0.5]
        assert (restarted["iterations_since_restore"] < restarted["training_iteration"]).all()
        assert best["loss"].is_monotonic_decreasing  # the restarts went on from its state


@pytest.mark.usefixtures("ray_session")
def test_tuner_with_pb2(tmp_path, monkeypatch):
    _run_script("pb2_function.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "pb2_function") as analysis:
        trials = analysis.trials
        assert len(trials) == 4 and {t.status for t in trials} == {"TERMINATED"}
        assert analysis.spec["scheduler"] == "PB2"
        exploits = analysis.exploits
        # Synchronous: the whole population is ranked at iterations 4, 8 and 12 (the last, as in
        # Ray Tune), the bottom one of the four exploits the top one each time.
        assert [e["iteration"] for e in exploits] == [4, 8, 12], exploits
        grid = {0.05, 0.1, 0.2, 0.3}
        for exploit in exploits:
            new_lr = exploit["new_config"]["lr"]
            assert 0.0 <= new_lr <= 1.0 and new_lr not in grid  # the bandit's, within the bounds
            assert exploit["new_config"]["momentum"] == 0.9  # the donor's other values
        # An exploiter went on from its donor's checkpoint: its accuracy right after the exploit
        # is the donor's at the checkpoint plus one step at the new lr.
        exploit = exploits[0]
        curves = analysis.trial_dataframes
        donor = curves[exploit["donor_trial_id"]].set_index("training_iteration")["mean_accuracy"]
        after = curves[exploit["trial_id"]]
        after = after[after["lr"] == exploit["new_config"]["lr"]].iloc[0]
        step_gain = 1.0 - 4.0 * (exploit["new_config"]["lr"] - 0.6) ** 2
        assert after["mean_accuracy"] == pytest.approx(donor[after["training_iteration"] - 1] + step_gain)
        db = Path(analysis.experiment_path) / "tuner.db"
        assert {k for (k,) in _rows(db, "SELECT key FROM experiment_state")} >= {"scheduler"}


@pytest.mark.usefixtures("ray_session")
def test_tuner_restore_after_an_interrupted_fit(tmp_path, monkeypatch):
    db = tmp_path / "restore_demo" / "tuner.db"
    log = open(tmp_path / "first_run.log", "w")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "restore.py"), str(tmp_path)], cwd=ROOT,
        env=dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address),
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if db.exists() and _count(db, "SELECT COUNT(*) FROM results") >= 6:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    output = (tmp_path / "first_run.log").read_text()
    # As in Ray Tune: fit() stops, says how to continue, and the script goes on with the results so far.
    assert proc.returncode == 0 and "Tuner.restore(" in output and "trials: " in output, output[-3000:]
    before = dict(((t, i), s) for t, i, s in _rows(db, "SELECT trial_id, iteration, data FROM results"))
    statuses = [s for (s,) in _rows(db, "SELECT status FROM trials")]
    assert 6 <= len(before) < 40 and statuses.count("TERMINATED") < 4

    _run_script("restore.py", tmp_path, monkeypatch)  # the same script again: it restores and finishes
    with tune.load(tmp_path / "restore_demo") as analysis:
        trials = analysis.trials
        assert len(trials) == 4 and {t.status for t in trials} == {"TERMINATED"}
        assert all(curve == list(range(1, 11)) for curve in _curves(analysis).values())  # no gap, no repeat
        after = dict(((t, i), s) for t, i, s in _rows(db, "SELECT trial_id, iteration, data FROM results"))
        assert all(after[key] == value for key, value in before.items())  # nothing stored was lost or changed
        resumed = analysis.results_df["resumed_from"]
        assert (resumed > 0).any(), "no interrupted trial went on from its checkpoint"
        assert analysis.get_best_config() == {"x": 4}


@pytest.mark.usefixtures("ray_session")
def test_repeater_with_optuna(tmp_path, monkeypatch):
    from optuna.trial import TrialState

    from tuner.search import OptunaSearch, Repeater

    _run_script("repeater.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "repeater") as analysis:
        trials = {t.trial_id: t for t in analysis.trials}
        db = Path(analysis.experiment_path) / "tuner.db"
    assert len(trials) == 12 and {t.status for t in trials.values()} == {"TERMINATED"}
    # The stored searcher state: four groups of three, each told to Optuna as its mean.
    (blob,) = [b for (b,) in _rows(db, "SELECT value FROM experiment_state WHERE key = 'searcher'")]
    searcher = Repeater(OptunaSearch(seed=3), repeat=3)
    searcher.load_state_dict(pickle.loads(blob))
    assert len(searcher.groups) == 4 and all(g["told"] for g in searcher.groups)
    told = searcher.searcher.study.get_trials(deepcopy=False)
    assert [t.state for t in told] == [TrialState.COMPLETE] * 4
    for group, ot_trial in zip(searcher.groups, told):
        members = [trials[tid] for tid in group["trials"]]
        assert [t.config["__trial_index__"] for t in members] == [0, 1, 2]
        assert {t.config["x"] for t in members} == {ot_trial.params["x"]}
        assert ot_trial.value == pytest.approx(sum(t.last_result["loss"] for t in members) / 3)


@pytest.mark.usefixtures("ray_session")
def test_pbt_replay_of_a_policy_file(tmp_path, monkeypatch):
    _run_script("pbt_replay.py", tmp_path, monkeypatch)
    with tune.load(tmp_path / "pbt_replay") as analysis:
        (trial,) = analysis.trials
        frame = analysis.trial_dataframes[trial.trial_id]
        assert list(frame["lr"]) == [0.01] * 3 + [0.012] * 3 + [0.0096] * 3
        assert trial.config == {"lr": 0.0096} and trial.status == "TERMINATED"
        # Each change is on record as an exploit of the trial's own checkpoint at that step.
        changes = [(r["donor_trial_id"], r["iteration"], r["old_config"], r["new_config"]) for r in analysis.exploits]
        assert changes == [(trial.trial_id, 3, {"lr": 0.01}, {"lr": 0.012}),
                           (trial.trial_id, 6, {"lr": 0.012}, {"lr": 0.0096})]


def _count(db: Path, sql: str) -> int:
    try:
        return int(_rows(db, sql)[0][0])
    except sa.exc.OperationalError:
        return 0


if __name__ == "__main__":  # write the Ray Tune versions of the scripts, to run them on Ray Tune by hand
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in SCRIPT_NAMES:
        (out / name).write_text(ray_tune_version((SCRIPTS / name).read_text()))
        print(out / name)
