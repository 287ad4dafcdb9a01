"""A checkpoint's files are replaced whole: a trial that rewrites the checkpoint of an iteration
the store has on record (a pause right after an exploit) and dies while writing leaves the old
files as they were, never cut short."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

from tuner.trainable.checkpoint import atomic_file


def test_an_error_while_writing_leaves_the_old_file_and_no_partial_one(tmp_path):
    path = tmp_path / "trainer_state.pt"
    path.write_bytes(b"the checkpoint on record")
    with pytest.raises(RuntimeError, match="mid-write"):
        with atomic_file(str(path)) as f:
            f.write(b"half of a new")
            raise RuntimeError("mid-write")
    assert path.read_bytes() == b"the checkpoint on record"
    assert os.listdir(tmp_path) == ["trainer_state.pt"]


def _write_until_killed(path: str, started) -> None:
    with atomic_file(path) as f:
        f.write(b"x" * 1000)
        f.flush()
        started.set()
        signal.pause()  # killed here, mid-write


def test_a_process_killed_while_writing_leaves_the_old_file(tmp_path):
    path = tmp_path / "trainer_state.pt"
    path.write_bytes(b"the checkpoint on record")
    started = multiprocessing.get_context("fork").Event()
    proc = multiprocessing.get_context("fork").Process(target=_write_until_killed, args=(str(path), started))
    proc.start()
    assert started.wait(30)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert path.read_bytes() == b"the checkpoint on record"


def test_a_completed_write_replaces_the_file(tmp_path):
    path = tmp_path / "metadata.json"
    path.write_text("old")
    with atomic_file(str(path), "w") as f:
        f.write("new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["metadata.json"]
