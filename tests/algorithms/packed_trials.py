"""What the packed-trial tests of every trainer check and do: each member's iterations stored
once and in order; a callback that SIGKILLs a pack's process once."""

from __future__ import annotations

import os
import signal

from tuner.callback import Callback


def iterations_once_each(analysis) -> None:
    """Every trial's iterations are stored once each, 1, 2, ... in order."""
    df = analysis.results_df
    assert not df.duplicated(["trial_id", "training_iteration"]).any()
    for trial_id, frame in analysis.trial_dataframes.items():
        assert list(frame["training_iteration"]) == list(range(1, len(frame) + 1)), trial_id


class KillPackOnce(Callback):
    """SIGKILLs the pack's process at the first result of iteration 2 (its ``pack_id`` is host:pid)."""

    def __init__(self) -> None:
        self.killed: str | None = None

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self.killed is None and result["training_iteration"] == 2:
            self.killed = result["pack_id"]
            os.kill(int(self.killed.rsplit(":", 1)[1]), signal.SIGKILL)
