"""The HParams export read back through TensorBoard's own HParams plugin, in process: what the
dashboard gets from /experiment and /session_groups, live, after a rebuild from the store, after
resumes; and tune.run's tensorboard arguments."""

from __future__ import annotations

import shutil

import pytest

from tests.tuner.tensorboard.expected import check_domains, expected_sessions
from tests.tuner.tensorboard.sweeps import train_flaky, train_quick
from tuner import export_tensorboard, tune
from tuner.store import Store, default_database_url
from tuner.api import DEFAULT_STORAGE_PATH
from tuner.tensorboard import logdir as files
from tuner.tensorboard import rebuild
from tuner.tensorboard import summaries
from tuner.tensorboard.reader import HParamsReader

pytestmark = pytest.mark.usefixtures("ray_session")


def test_experiment_declares_every_hparam_with_its_domain_and_every_metric(hparams_sweep):
    experiment = HParamsReader(hparams_sweep.logdir).experiment()
    infos = {h["name"]: h for h in experiment["hparamInfos"]}
    assert set(infos) == {"lr", "g", "act", "model.w", "model.depth", "model.hidden", "sleep"}
    assert infos["lr"]["domainInterval"] == {"minValue": 1e-4, "maxValue": 0.1}  # loguniform
    assert infos["model.w"]["domainInterval"] == {"minValue": 0.0, "maxValue": 1.0}  # uniform
    assert infos["model.depth"]["domainInterval"] == {"minValue": 1.0, "maxValue": 3.0}  # randint(1, 4)
    assert infos["g"]["domainDiscrete"] == [1.0, 2.0, 3.0]  # grid_search
    assert (infos["act"]["type"], infos["act"]["domainDiscrete"]) == ("DATA_TYPE_STRING", ["relu", "tanh"])
    assert infos["model.hidden"]["domainDiscrete"] == ["[32, 32]"] and not infos["model.hidden"]["differs"]
    assert infos["sleep"]["domainDiscrete"] == [0.25] and not infos["sleep"]["differs"]
    assert all(infos[n]["differs"] for n in ("lr", "g", "act", "model.w", "model.depth"))
    metrics = [m["name"]["tag"] for m in experiment["metricInfos"]]
    assert metrics[0] == "score"  # the tune metric first, then every numeric metric reported
    assert set(metrics) == {"score", "loss", "info/kl", "ok", "maybe", "training_iteration", "time_total_s",
                            "time_this_iter_s"}


def test_every_trial_appears_once_with_its_hparams_final_metrics_and_status(hparams_sweep):
    reader = HParamsReader(hparams_sweep.logdir)
    sessions = reader.sessions()
    expected = expected_sessions(hparams_sweep.run_dir, "train")
    assert len(expected) == 6
    assert sessions == expected
    statuses = sorted((s["hparams"]["g"], s["status"], s["metrics"]["training_iteration"][0]) for s in sessions.values())
    assert statuses == [(1.0, "STATUS_SUCCESS", 4)] * 2 + [(2.0, "STATUS_SUCCESS", 2)] * 2 + [(3.0, "STATUS_FAILURE", 1)] * 2
    check_domains(reader.experiment(), sessions)


def test_the_export_is_live(hparams_sweep):
    """While the sweep ran, a reader saw running trials (no session end yet) with their curves."""
    good = [(t, s) for t, s in hparams_sweep.polls if isinstance(s, dict)]
    assert good, hparams_sweep.polls
    running = [t for t, sessions in good
               if any(s["status"] == "STATUS_UNKNOWN" and s["metrics"] for s in sessions.values())]
    # a poll that began before tune.run returned saw a trial without its session end, and once
    # the sweep is over no session is left without one: that view could only come from the live export
    assert running and running[0] < hparams_sweep.returned_at
    assert all(s["status"] != "STATUS_UNKNOWN" for s in HParamsReader(hparams_sweep.logdir).sessions().values())


def test_rebuild_from_the_store_matches_the_live_export(hparams_sweep, tmp_path):
    live = HParamsReader(hparams_sweep.logdir)
    rebuilt_dir = export_tensorboard(hparams_sweep.run_dir, logdir=tmp_path / "rebuilt")
    rebuilt = HParamsReader(rebuilt_dir)
    live_experiment, rebuilt_experiment = live.experiment(), rebuilt.experiment()
    for experiment in (live_experiment, rebuilt_experiment):
        experiment.pop("timeCreatedSecs")
    assert rebuilt_experiment == live_experiment
    assert rebuilt.sessions() == live.sessions()

    # An existing logdir is replaced only when asked to.
    copy = tmp_path / "copy"
    shutil.copytree(hparams_sweep.logdir, copy)
    with pytest.raises(ValueError, match="overwrite=True"):
        export_tensorboard(hparams_sweep.run_dir, logdir=copy)
    export_tensorboard(str(hparams_sweep.run_dir), logdir=copy, overwrite=True)
    assert HParamsReader(copy).sessions() == live.sessions()


def _session_starts(run_dir) -> int:
    return sum(
        1 for path in files.event_files(run_dir) for event in files.read_events(path)
        for value in event.summary.value if value.tag == summaries.SESSION_START_TAG
    )


def _steps(logdir, run: str, tag: str) -> list[int]:
    return [e.step for path in files.event_files(logdir / run) for e in files.read_events(path)
            for v in e.summary.value if v.tag == tag]


def test_resumes_add_no_second_session_and_the_experiment_is_rewritten_idempotently(tmp_path):
    kwargs = dict(config={"x": tune.grid_search([0, 1]), "marker": str(tmp_path / "marker")}, metric="score",
                  mode="max", resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="flaky",
                  verbose=0, raise_on_failed_trial=False)
    analysis = tune.run(train_flaky, **kwargs)
    logdir = tmp_path / "flaky" / "tensorboard"
    names = {t.trial_id: f"train_flaky_{t.trial_id}" for t in analysis.trials}
    failed = next(names[t.trial_id] for t in analysis.trials if t.status == "ERROR")
    first = HParamsReader(logdir).sessions()
    assert first[failed]["status"] == "STATUS_FAILURE" and first[failed]["metrics"]["score"] == (1, 11.0)

    # The failed trial is retried: same session, its failure replaced by a success, no step twice.
    tune.run(train_flaky, resume="ERRORED_ONLY", **kwargs)
    after = HParamsReader(logdir).sessions()
    assert sorted(after) == sorted(names.values())
    assert {s["status"] for s in after.values()} == {"STATUS_SUCCESS"}
    assert after[failed]["metrics"]["score"] == (3, 13.0)
    assert _steps(logdir, failed, "score") == [1, 2, 3]
    assert all(_session_starts(logdir / name) == 1 for name in names.values())
    assert after == expected_sessions(tmp_path / "flaky", "train_flaky")

    # Resuming a finished sweep writes nothing new: the same experiment file, the same sessions.
    root = [p.name for p in files.event_files(logdir)]
    tune.run(train_flaky, resume=True, **kwargs)
    assert [p.name for p in files.event_files(logdir)] == root
    assert HParamsReader(logdir).sessions() == after
    assert all(_session_starts(logdir / name) == 1 for name in names.values())

    # A sweep resumed without its logdir gets it back from the store.
    shutil.rmtree(logdir)
    tune.run(train_flaky, resume=True, **kwargs)
    assert HParamsReader(logdir).sessions() == after


@pytest.mark.parametrize("kwargs, field", [
    ({"tensorboard": "yes"}, "tensorboard"),
    ({"tensorboard": None}, "tensorboard"),
    ({"tensorboard_dir": 3}, "tensorboard_dir"),
    ({"tensorboard_dir": ""}, "tensorboard_dir"),
])
def test_bad_tensorboard_arguments_are_refused_before_anything_is_written(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=f"^{field} must"):
        tune.run(train_quick, config={"x": 1}, storage_path=str(tmp_path / "runs"), name="bad", verbose=0, **kwargs)
    assert not (tmp_path / "runs").exists()


def test_export_off_writes_nothing_and_the_store_alone_rebuilds_it(tmp_path):
    tune.run(train_quick, config={"x": tune.choice([1, 2]), "nested": {"y": tune.uniform(0, 1)}}, metric="score",
             mode="max", resources_per_trial={"cpu": 0.5}, storage_path=str(tmp_path), name="off", verbose=0,
             tensorboard=False)
    run_dir = tmp_path / "off"
    assert not (run_dir / "tensorboard").exists()
    store = Store(default_database_url(run_dir), create=False)
    spec = store.get_experiment("off")["spec"]
    store.close()
    assert spec["tensorboard_dir"] is None
    assert [d["name"] for d in spec["hparam_domains"]] == ["x", "nested.y"]

    logdir = export_tensorboard(run_dir)
    assert logdir == run_dir / "tensorboard"
    assert rebuild._DEFAULT_STORAGE_PATH == DEFAULT_STORAGE_PATH  # where a bare name is looked for
    reader = HParamsReader(logdir)
    assert reader.sessions() == expected_sessions(run_dir, "train_quick")
    assert {h["name"] for h in reader.experiment()["hparamInfos"]} == {"x", "nested.y"}


def test_custom_tensorboard_dir(tmp_path):
    tune.run(train_quick, config={"x": 1}, metric="score", mode="max", resources_per_trial={"cpu": 0.5},
             storage_path=str(tmp_path / "runs"), name="custom", verbose=0, tensorboard_dir=tmp_path / "tb")
    assert not (tmp_path / "runs" / "custom" / "tensorboard").exists()
    sessions = HParamsReader(tmp_path / "tb").sessions()
    assert [s["hparams"] for s in sessions.values()] == [{"x": 1.0}]
