"""The exporter driven directly (no Ray), read back through TensorBoard's HParams plugin; and the
plugin behaviours the export is built around."""

from __future__ import annotations

import time

import numpy as np

from tests.tuner.tensorboard.expected import check_domains
from tuner import tune
from tuner.tensorboard import logdir as files
from tuner.tensorboard import summaries
from tuner.tensorboard.exporter import TensorBoardExporter
from tuner.tensorboard.reader import HParamsReader


def _result(i, **values):
    return {"training_iteration": i, "timestamp": time.time(), "done": False, "trial_id": "x", **values}


def test_the_plugin_shows_no_metric_when_the_experiment_declares_none(tmp_path):
    """Why the experiment summary lists the metrics: with an experiment summary, the plugin takes
    its metric list as it is, and an empty one means no metric column (it does not infer them)."""
    writer = files.RunWriter(tmp_path, flush_secs=1)
    writer.add(summaries.event(summaries.experiment([{"name": "x", "kind": "interval", "dtype": "float", "min": 0,
                                                      "max": 1}], {}, [], 0.0), 0, 0.0))
    writer.close()
    run = files.RunWriter(tmp_path / "t0", flush_secs=1)
    run.add(summaries.event(summaries.session_start({"x": 0.5}, "t0", 0.0), 0, 0.0))
    run.add(summaries.scalars_event([("score", 1.0)], 1, 0.0, run.tags_with_metadata))
    run.close()
    reader = HParamsReader(tmp_path)
    assert reader.experiment()["metricInfos"] == []
    assert reader.sessions()["t0"]["metrics"] == {}


def test_the_plugin_keeps_the_first_session_end(tmp_path):
    """Why a running trial has no session end: TensorBoard keeps the first one of a run."""
    run = files.RunWriter(tmp_path / "t0", flush_secs=1)
    run.add(summaries.event(summaries.session_start({"x": 0.5}, "t0", 0.0), 0, 0.0))
    run.add(summaries.event(summaries.session_end("failure", 1.0), 0, 1.0))
    run.add(summaries.event(summaries.session_end("success", 2.0), 0, 2.0))
    run.close()
    assert HParamsReader(tmp_path).sessions()["t0"]["status"] == "STATUS_FAILURE"
    files.drop_session_end(tmp_path / "t0").close()
    assert HParamsReader(tmp_path).sessions()["t0"]["status"] == "STATUS_UNKNOWN"


def test_experiment_summary_follows_new_metrics_and_hparams(tmp_path):
    exporter = TensorBoardExporter(tmp_path, max_open_writers=2)
    space = {"opt": tune.choice([{"name": "sgd", "lr": tune.uniform(0, 1)}, {"name": "adam"}]),
             "mixed": tune.choice([None, 0.1, "a"]), "derived": tune.sample_from(lambda spec: 1)}
    exporter.begin(metric="score", search_space=space)
    configs = [{"opt": {"name": "sgd", "lr": 0.5}, "mixed": None, "derived": 1},
               {"opt": {"name": "adam"}, "mixed": 0.1, "derived": 2},
               {"opt": {"name": "adam"}, "mixed": "a", "derived": 3}]
    for t, config in enumerate(configs):  # all run at once, with two files open at most
        exporter.start_session(f"t{t}", config)
    for i in range(1, 4):
        if i == 2:  # files opened a second ago are closed for a new one, and opened again later
            time.sleep(1.1)
            exporter.start_session("t3", configs[0])
        for t in range(3):
            exporter.add_result(f"t{t}", _result(i, score=t + i, loss=None if i == 2 else 1.0 / i, text="x"))
    assert len(files.event_files(tmp_path / "t0")) == 2
    exporter.end_session("t0", "success")  # the first end writes the experiment summary
    first = HParamsReader(tmp_path).experiment()
    assert [m["name"]["tag"] for m in first["metricInfos"]] == ["score", "loss", "training_iteration"]

    exporter.add_result("t1", _result(4, score=9.0, eval_return=5.0))  # a metric that turns up late
    exporter.end_session("t1", "failure")
    exporter.close()
    root = [p.name for p in files.event_files(tmp_path)]
    assert len(root) == 1 and root[0].endswith(files.ROOT_SUFFIX)  # replaced, not added
    reader = HParamsReader(tmp_path)
    experiment = reader.experiment()
    assert [m["name"]["tag"] for m in experiment["metricInfos"]] == ["score", "eval_return", "loss",
                                                                     "training_iteration"]
    infos = {h["name"]: h for h in experiment["hparamInfos"]}
    assert set(infos) == {"opt.name", "opt.lr", "mixed", "derived"}
    assert infos["mixed"]["domainDiscrete"] == ["0.1", "None", "a"]
    assert (infos["derived"]["type"], infos["opt.name"]["type"]) == ("DATA_TYPE_FLOAT64", "DATA_TYPE_STRING")
    sessions = reader.sessions()
    assert {n: s["status"] for n, s in sessions.items()} == {"t0": "STATUS_SUCCESS", "t1": "STATUS_FAILURE",
                                                              "t2": "STATUS_UNKNOWN", "t3": "STATUS_UNKNOWN"}
    assert sessions["t0"]["hparams"] == {"opt.name": "sgd", "opt.lr": 0.5, "mixed": "None", "derived": 1.0}
    assert sessions["t2"]["metrics"]["loss"] == (3, np.float32(1.0 / 3).item())  # None at step 2 is left out
    assert sessions["t1"]["metrics"]["score"] == (4, 9.0) and sessions["t2"]["metrics"]["score"] == (3, 5.0)
    assert "text" not in sessions["t0"]["metrics"] and "timestamp" not in sessions["t0"]["metrics"]
    check_domains(experiment, sessions)


def test_run_writer_files_pass_tensorboards_checksums(tmp_path):
    """Records framed by RunWriter (C CRC-32C) read back through TensorBoard's own loader, which
    checks every checksum, and the CRC agrees with TensorBoard's pure-Python one."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference

    for data in (b"", b"a", bytes(range(256)) * 3):
        assert files.masked_crc32c(data) == reference(data)
    run = files.RunWriter(tmp_path / "t0", flush_secs=60)
    for step in range(1, 4):
        run.add(summaries.scalars_event([("score", float(step))], step, 0.0, run.tags_with_metadata))
    assert [p.stat().st_size for p in files.event_files(tmp_path / "t0")] != [0]  # file_version is on disk
    run.close()
    (path,) = files.event_files(tmp_path / "t0")
    records = list(RawEventFileLoader(str(path), detect_file_replacement=False).Load())
    assert len(records) == 4  # file_version, then the three steps
    assert [e.step for e in files.read_events(path)] == [0, 1, 2, 3]
