"""Kafka's checkpoint files: the log dir's offset checkpoints and the per-partition
``leader-epoch-checkpoint``.

Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) are text: ``0\\n<count>\\n<topic> <partition> <offset>\\n...``.
The leader epoch checkpoint is ``0\\n<count>\\n<epoch> <start_offset>\\n...``. Every write is
atomic: a temporary file, fsync, rename, fsync of the directory.

This module owns the formats and the leader epoch cache's rules (Kafka's
``LeaderEpochFileCache``); it does not decide when to write.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable
from pathlib import Path

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class CorruptCheckpoint(ValueError):
    """A checkpoint file that does not follow Kafka's format."""


def write_atomically(path: Path, text: str, *, sync: bool = True) -> None:
    """Replace ``path`` with ``text``: write a sibling .tmp, fsync, rename, fsync the dir
    (without ``sync``: no fsyncs; ``fsync_file_and_directory`` makes it durable later)."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        data = text.encode()
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += os.write(fd, view[written:])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    if sync:
        _fsync_path(path.parent)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file_and_directory(path: Path) -> None:
    """Make an earlier ``write_atomically(..., sync=False)`` durable."""
    _fsync_path(path)
    _fsync_path(path.parent)


def _parse(path: Path, fields: int) -> list[list[str]]:
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        raise CorruptCheckpoint(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpoint(f"{path}: unsupported checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpoint(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(entry) != fields for entry in entries):
        raise CorruptCheckpoint(f"{path}: expected {count} entries of {fields} fields")
    return entries


def format_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> str:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    return "\n".join(lines) + "\n"


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_atomically(path, format_offset_checkpoint(offsets))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The checkpoint's offsets; empty when the file does not exist."""
    if not path.exists():
        return {}
    try:
        return {
            (topic, int(partition)): int(offset) for topic, partition, offset in _parse(path, 3)
        }
    except ValueError as error:
        if isinstance(error, CorruptCheckpoint):
            raise
        raise CorruptCheckpoint(f"{path}: non-numeric partition or offset") from error


class LeaderEpochCache:
    """Epoch -> start offset of the epoch's first batch, as Kafka's LeaderEpochFileCache.

    ``log_end_offset`` is read when answering for the latest epoch (its end is the log's
    end). Every change is written to ``leader-epoch-checkpoint`` atomically.
    """

    def __init__(self, path: Path, log_end_offset: Callable[[], int], *, new: bool = False) -> None:
        """``new``: the log's directory was just made, so there is no file to read (a
        ``stat`` per new partition on the event loop, a fifth of its time while
        thousands were created)."""
        self.path = path
        self._log_end_offset = log_end_offset
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        self._unsynced = False  # written without fsync (see ``assign``'s ``sync``)
        self._unwritten = False  # changed in memory only (see ``assign``'s ``defer``)
        if not new and path.exists():
            try:
                for epoch, start_offset in _parse(path, 2):
                    self._epochs.append(int(epoch))
                    self._start_offsets.append(int(start_offset))
            except ValueError:
                # Matches Kafka's tolerance in spirit: a follower re-learns epochs from
                # the batches it appends, so an unreadable cache starts empty.
                self._epochs, self._start_offsets = [], []

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets, strict=True))

    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(
        self, epoch: int, start_offset: int, *, sync: bool = True, defer: bool = False
    ) -> None:
        """Record that ``epoch`` starts at ``start_offset``; drop entries it contradicts
        (an equal or later epoch, or a start offset at or after this one). With
        ``defer`` the file is written later, by ``write_deferred`` (before the log's
        next append) or the log's flush (``take_unsynced``): for an empty log, which
        nothing depends on yet."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} / start offset {start_offset} is negative")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._start_offsets[-1]:
            return
        while self._epochs and (
            self._epochs[-1] >= epoch or self._start_offsets[-1] >= start_offset
        ):
            self._epochs.pop()
            self._start_offsets.pop()
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)
        if defer:
            self._unwritten = True
        else:
            self._write(sync=sync)

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch <= requested, start offset of
        the next epoch), the log end offset for the latest epoch, (-1, -1) when unknown."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, self._log_end_offset()
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        keep = len(self._start_offsets)
        while keep and self._start_offsets[keep - 1] >= end_offset:
            keep -= 1
        if keep != len(self._epochs):
            del self._epochs[keep:]
            del self._start_offsets[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly before it and move
        the start of the epoch covering it."""
        removed = 0
        while removed < len(self._epochs) and self._start_offsets[removed] <= start_offset:
            removed += 1
        if removed == 0:
            return
        if removed == 1 and self._start_offsets[0] == start_offset:
            return
        epoch = self._epochs[removed - 1]
        del self._epochs[:removed]
        del self._start_offsets[:removed]
        self._epochs.insert(0, epoch)
        self._start_offsets.insert(0, start_offset)
        self._write()

    def clear(self) -> None:
        self._epochs, self._start_offsets = [], []
        self._write()

    def _write(self, *, sync: bool = True) -> None:
        write_atomically(self.path, format_epoch_checkpoint(self.entries()), sync=sync)
        self._unsynced = not sync
        self._unwritten = False

    def write_deferred(self) -> None:
        """Write what a deferred ``assign`` changed (without fsync: the log's flush does
        that, ``take_unsynced``)."""
        if self._unwritten:
            self._write(sync=False)

    def take_unsynced(self) -> Path | None:
        """For a flush that fsyncs on another thread (the log's): write a deferred
        change, and return the file to fsync with its directory when a change is not
        durable yet (None: nothing to do). The caller owns that fsync from here on."""
        self.write_deferred()
        if not self._unsynced:
            return None
        self._unsynced = False
        return self.path


def format_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    entries = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{epoch} {start_offset}" for epoch, start_offset in entries]
    return "\n".join(lines) + "\n"
