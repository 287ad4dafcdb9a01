"""The keeper's side of a checkpoint sent from another node: written on the driver's disk, unless
that node's folder is this one (a disk the nodes share), which must then stay as it is."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from tuner.storage.keeper import CheckpointKeeper, pack, unpack


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


def test_a_checkpoint_fetched_again_on_a_node_that_holds_it_is_left_in_place(tmp_path):
    """A trial reading it (an exploit's restore) must not lose it to another trial's fetch."""
    here = tmp_path / "node" / "checkpoint_000009"
    data = pack(_checkpoint(tmp_path / "driver", "abc"))
    unpack(data, str(here), replace=False)
    before = os.stat(here / "sub" / "weights").st_ino
    unpack(data, str(here), replace=False)
    assert os.stat(here / "sub" / "weights").st_ino == before
    assert [p.name for p in here.parent.iterdir()] == ["checkpoint_000009"]  # nothing left beside it


def test_trials_fetching_one_checkpoint_at_once_each_read_it_whole(tmp_path):
    """Two exploiters on one node may pick the same donor: each reads the checkpoint right after
    its fetch returns, while the other's fetch is still running."""
    here = tmp_path / "node" / "checkpoint_000009"
    data = pack(_checkpoint(tmp_path / "driver", "abc" * 10_000))
    start = threading.Barrier(8)

    def fetch_then_read() -> str:
        start.wait()
        unpack(data, str(here), replace=False)
        return (here / "sub" / "weights").read_text()[:3]

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda _: fetch_then_read(), range(8))) == ["abc"] * 8
    assert [p.name for p in here.parent.iterdir()] == ["checkpoint_000009"]


def test_one_checkpoint_sent_twice_at_once_is_written_once_whole(tmp_path):
    """The keeper takes several puts at once (threads of one process)."""
    here = tmp_path / "driver" / "checkpoint_000003"
    data = pack(_checkpoint(tmp_path / "node", "abc"))
    keeper = CheckpointKeeper()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: keeper.put(str(here), data), range(4)))
    assert (here / "sub" / "weights").read_text() == "abc"
    assert [p.name for p in here.parent.iterdir()] == ["checkpoint_000003"]
