"""Event files of the HParams export: TensorBoard's TFRecord event files, written by the export's
one thread (see :class:`RunWriter`), read back (on a resume) with a plain TFRecord reader.

Layout of a logdir::

    <logdir>/events.out.tfevents.*.tuner     the experiment summary (only file at the root)
    <logdir>/<trial_name>/events.out.tfevents.*   session start, scalars, session end

TensorBoard keeps the FIRST summary it reads for a tag of a run (the Python event accumulator and
the Rust data server alike): a second experiment summary, or a second session end, in the same run
is ignored by a server that has read the first, and by a new one reading the files in order. So the
experiment summary is replaced (new file, old one deleted), and a session end is written once, when
the trial ends for good; a trial that runs again after it ended (a failed trial retried by a
resume) has its run's files rewritten without the old end.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
import struct
import time
from pathlib import Path
from typing import Iterator

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as _slow_masked_crc32c

from tuner.tensorboard import summaries

#: File-name suffix of the experiment summaries at the root: the only root files the export
#: replaces (and deletes).
ROOT_SUFFIX = ".tuner"
_HOST = socket.gethostname()
_FILE_COUNTER = itertools.count()

try:
    from google_crc32c import value as _crc32c
except ImportError:  # pragma: no cover - google-crc32c is a dependency; still correct without it
    _crc32c = None


def is_event_file(name: str) -> bool:
    return "tfevents" in name


def event_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The event files directly in ``directory``, in the order TensorBoard reads them."""
    try:
        names = sorted(n for n in os.listdir(directory) if is_event_file(n))
    except FileNotFoundError:
        return []
    return [Path(directory) / n for n in names if (Path(directory) / n).is_file()]


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C of a TFRecord (C-accelerated ``google_crc32c``; TensorBoard's own
    pure-Python CRC, about 40 us per event, when that is not installed)."""
    if _crc32c is None:
        return _slow_masked_crc32c(data)
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class RunWriter:
    """An event file of one run, written in TensorBoard's TFRecord framing by the caller's thread.

    TensorBoard's ``EventFileWriter`` starts a thread per file (about 0.7 ms to open and close) and
    checksums in pure Python; a sweep opens one file per trial, from the export's one thread, so
    records are framed here (TensorBoard's format and file names, ``file_version`` first) into a
    buffer that goes to disk at :meth:`flush` (the exporter's thread calls it whenever it is idle),
    when an :meth:`add` finds ``flush_secs`` passed since the last one, and at :meth:`close`.
    """

    def __init__(self, directory: str | os.PathLike[str], flush_secs: float, suffix: str = "") -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        #: No earlier than the second in the file's name. Files of a run are read in name order, and
        #: two names of one second and one process order by a counter compared as text ("10" < "9"):
        #: a run's next file must be opened in a later second (see TensorBoardExporter._writer).
        now = time.time()
        self.created_second = int(now)
        self.path = directory / (f"events.out.tfevents.{int(now):010d}.{_HOST}.{os.getpid()}."
                                 f"{next(_FILE_COUNTER)}{suffix}")
        self._file = open(self.path, "wb")
        self._buffer = bytearray()
        self._flush_secs = float(flush_secs)
        self._flushed_at = time.monotonic()
        self.tags_with_metadata: set[str] = set()
        self.add(event_pb2.Event(wall_time=now, file_version="brain.Event:2",
                                 source_metadata=event_pb2.SourceMetadata(writer="tuner")))
        self.flush()

    def add(self, event: event_pb2.Event) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._buffer += header
        self._buffer += struct.pack("<I", masked_crc32c(header))
        self._buffer += data
        self._buffer += struct.pack("<I", masked_crc32c(data))
        if time.monotonic() - self._flushed_at >= self._flush_secs:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._file.write(self._buffer)
            self._buffer.clear()
            self._file.flush()
        self._flushed_at = time.monotonic()

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()

    def discard(self) -> None:
        """Close the file, dropping what is not written yet (the logdir takes no more writes)."""
        self._buffer.clear()
        try:
            self._file.close()
        except OSError:  # what the file object still buffered cannot be written either
            pass


def read_events(path: str | os.PathLike[str]) -> Iterator[event_pb2.Event]:
    """Events of one file (TFRecord framing; CRCs not checked; a torn last record ends it)."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                return
            try:
                yield event_pb2.Event.FromString(data)
            except Exception:  # noqa: BLE001 - a corrupt record: stop where TensorBoard would
                return


@dataclasses.dataclass
class RunState:
    """What a run directory already holds."""

    started: bool = False
    end_status: str | None = None
    max_step: int = -1  # highest step of a scalar written


def scan_run(directory: str | os.PathLike[str]) -> RunState:
    state = RunState()
    for path in event_files(directory):
        for event in read_events(path):
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                if value.tag == summaries.SESSION_START_TAG:
                    state.started = True
                elif value.tag == summaries.SESSION_END_TAG:
                    if state.end_status is None:  # TensorBoard keeps the first
                        state.end_status = summaries.end_status_name(value.metadata.plugin_data.content)
                elif value.HasField("tensor"):
                    state.max_step = max(state.max_step, event.step)
    return state


def read_experiment(logdir: str | os.PathLike[str]) -> bytes | None:
    """The plugin data of the experiment summary at the root (the first one, as TensorBoard)."""
    for path in event_files(logdir):
        for event in read_events(path):
            for value in event.summary.value:
                if value.tag == summaries.EXPERIMENT_TAG:
                    return value.metadata.plugin_data.content
    return None


def replace_root(logdir: str | os.PathLike[str], summary: summary_pb2.Summary, wall_time: float) -> None:
    """Write ``summary`` (the experiment) in a new root file, then delete the export's older ones."""
    old = [p for p in event_files(logdir) if p.name.endswith(ROOT_SUFFIX)]
    writer = RunWriter(logdir, flush_secs=1.0, suffix=ROOT_SUFFIX)
    try:
        writer.add(summaries.event(summary, step=0, wall_time=wall_time))
    finally:
        writer.close()
    for path in old:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def drop_session_end(directory: str | os.PathLike[str], flush_secs: float = 1.0) -> RunWriter:
    """Rewrite a run's event files without their session end into one new file (old ones deleted);
    returns that file's writer, open, for what the run writes next."""
    old = event_files(directory)
    events = []
    for path in old:
        for event in read_events(path):
            if event.HasField("file_version") or event.HasField("source_metadata"):
                continue
            if event.HasField("summary") and any(v.tag == summaries.SESSION_END_TAG for v in event.summary.value):
                kept = [v for v in event.summary.value if v.tag != summaries.SESSION_END_TAG]
                if not kept:
                    continue
                del event.summary.value[:]
                event.summary.value.extend(kept)
            events.append(event)
    writer = RunWriter(directory, flush_secs=flush_secs)
    try:
        for event in events:
            writer.add(event)
            for value in event.summary.value:
                if value.HasField("metadata"):
                    writer.tags_with_metadata.add(value.tag)
        writer.flush()
    except BaseException:
        writer.close()
        raise
    for path in old:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    return writer
