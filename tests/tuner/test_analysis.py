"""ExperimentAnalysis's best trial: NaN and infinite metrics never rank (Ray Tune's rule), and the
answer says which trials that left out."""

from __future__ import annotations

import logging
import math

import pytest

from tests.tuner.stored_sweep import store_sweep
from tuner.analysis import ExperimentAnalysis

NAN, INF = float("nan"), float("inf")


@pytest.fixture
def mixed(tmp_path):
    store_sweep(tmp_path / "mixed", {"a": 1.0, "b": NAN, "c": INF, "d": 2.0, "e": -INF, "f": None})
    with ExperimentAnalysis(tmp_path / "mixed") as analysis:
        yield analysis


def test_nan_and_inf_never_rank_and_a_warning_names_the_trials_left_out(mixed, caplog):
    caplog.set_level(logging.WARNING, logger="tuner.analysis")
    assert mixed.get_best_trial().trial_id == "d"  # inf would win "max" if it ranked
    assert mixed.get_best_trial(mode="min").trial_id == "a"  # and -inf "min"
    assert mixed.best_config == {"x": 3}
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1, notes  # said once, however often it is asked
    assert notes[0] == ("sweep 'mixed': 3 trial(s) left out of the best 'score': b (NaN), c (inf), e (-inf) "
                        "reported NaN or infinity, which never ranks (as in Ray Tune)")


def test_explain_best_trial_gives_the_score_and_the_trials_left_out(mixed, caplog):
    answer = mixed.explain_best_trial(scope="avg")
    assert answer.trial.trial_id == "d" and answer.value == 1.0
    assert list(answer.skipped) == ["b", "c", "e"] and math.isnan(answer.skipped["b"])
    assert not caplog.records  # explaining logs nothing
    kept = mixed.explain_best_trial(filter_nan_and_inf=False)  # Ray Tune's switch: every number ranks
    assert kept.trial.trial_id == "c" and kept.skipped == {} and kept.note() is None


def test_every_metric_nan_is_said_rather_than_a_silent_none(tmp_path, caplog):
    store_sweep(tmp_path / "nans", {"a": NAN, "b": NAN})
    caplog.set_level(logging.WARNING, logger="tuner.analysis")
    with ExperimentAnalysis(tmp_path / "nans") as analysis:
        assert analysis.get_best_trial() is None and analysis.best_config is None
    assert [r.getMessage() for r in caplog.records] == [
        "sweep 'nans': no trial has a finite 'score' to rank: a (NaN), b (NaN) reported NaN or infinity, "
        "which never ranks (as in Ray Tune)"
    ]


def test_loading_a_sweep_before_and_while_its_store_is_created_says_so(tmp_path):
    from tuner.errors import TuneError
    from tuner.execution.sweep_lock import SweepLock
    from tuner.store import StoreError, default_database_url

    with pytest.raises(TuneError, match="no tuner.db there"):
        ExperimentAnalysis(tmp_path / "starting")
    (tmp_path / "starting").mkdir()
    (tmp_path / "starting" / "tuner.db").touch()  # the sweep has opened its file, no table yet
    lock = SweepLock(default_database_url(tmp_path / "starting"), "starting", tmp_path / "starting").acquire()
    try:  # its driver holds it: it is starting
        with pytest.raises(TuneError, match="no sweep yet at .*starting.*no tuner table"):
            ExperimentAnalysis(tmp_path / "starting")
    finally:
        lock.release()
    # no driver: an empty file, not a tuner database; reading it wrote nothing into it
    with pytest.raises(StoreError, match="starting/tuner.db is empty: not a tuner database"):
        ExperimentAnalysis(tmp_path / "starting")
    assert (tmp_path / "starting" / "tuner.db").stat().st_size == 0
