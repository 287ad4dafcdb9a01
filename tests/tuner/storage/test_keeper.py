"""The keeper's side of a checkpoint sent from another node: written on the driver's disk, unless
that node's folder is this one (a disk the nodes share), which must then stay as it is."""

from __future__ import annotations

import os

from tuner.storage.keeper import CheckpointKeeper, pack


def _checkpoint(folder, payload: str) -> str:
    os.makedirs(folder / "sub", exist_ok=True)
    (folder / "state.json").write_text("{}")
    (folder / "sub" / "weights").write_text(payload)
    return str(folder)


def test_a_checkpoint_from_a_node_with_a_disk_of_its_own_is_written_here(tmp_path):
    sent = _checkpoint(tmp_path / "node" / "checkpoint_000001", "abc")
    here = tmp_path / "driver" / "checkpoint_000001"
    assert CheckpointKeeper().put(str(here), pack(sent)) is False
    assert (here / "sub" / "weights").read_text() == "abc" and (here / "state.json").exists()


def test_the_same_folder_on_a_shared_disk_is_left_as_it_is_and_said_to_be_shared(tmp_path):
    folder = _checkpoint(tmp_path / "checkpoint_000001", "abc")
    before = os.stat(os.path.join(folder, "sub", "weights")).st_ino
    assert CheckpointKeeper().put(folder, pack(folder)) is True
    assert os.stat(os.path.join(folder, "sub", "weights")).st_ino == before  # not rewritten


def test_a_checkpoint_made_again_at_the_same_path_replaces_the_old_one_of_the_same_size(tmp_path):
    """A trial rewound (an exploit) writes checkpoint_000003 again: new bytes, same sizes."""
    here = tmp_path / "driver" / "checkpoint_000003"
    keeper = CheckpointKeeper()
    assert keeper.put(str(here), pack(_checkpoint(tmp_path / "first", "abc"))) is False
    assert keeper.put(str(here), pack(_checkpoint(tmp_path / "second", "abd"))) is False
    assert (here / "sub" / "weights").read_text() == "abd"
