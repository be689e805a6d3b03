"""Offset and time indexes of one log segment, in Kafka's on-disk format.

``<base>.index`` holds 8-byte entries: a 4-byte offset relative to the segment's base
offset and a 4-byte file position, big-endian. ``<base>.timeindex`` holds 12-byte
entries: an 8-byte timestamp and a 4-byte relative offset. Both are sparse: the
segment adds an entry every ``index.interval.bytes`` of log data (Kafka's rule).

Unlike Kafka, the files are plain append-only files (no preallocation, no mmap). The
entries live in memory as arrays (``bisect`` does the lookups) and reach the file in
small groups: when enough are pending, on roll, on flush and on close. An index that
lost its tail in a crash is rebuilt by recovery, which covers every segment that the
recovery point does not (a segment below the recovery point was flushed, index
included). This module owns the entries and their files; it never reads the log.
"""

from __future__ import annotations

import operator
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

_LITTLE_ENDIAN = sys.byteorder == "little"
# Pending entries are written once this many have accumulated (or on roll/flush/close).
_WRITE_BATCH = 64


def _strictly_increasing(values: array) -> bool:
    return all(map(operator.lt, values, values[1:]))


def _to_big_endian(values: array) -> bytes:
    if _LITTLE_ENDIAN:
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _from_big_endian(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    if _LITTLE_ENDIAN:
        values.byteswap()
    return values


class _IndexFile:
    """An append-only file of fixed-size entries, written in groups."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_bytes // self.entry_size, 1)
        self._written = 0  # entries already in the file

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def write_pending(self) -> None:
        count = len(self)
        if self._written >= count:
            return
        data = self._encode(self._written, count)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._written = count

    def _maybe_write(self) -> None:
        if len(self) - self._written >= _WRITE_BATCH:
            self.write_pending()

    def _truncate_file(self, count: int) -> None:
        """Cut the file to ``count`` entries after the in-memory arrays were cut."""
        if count < self._written:
            os.truncate(self.path, count * self.entry_size)
            self._written = count

    def create_file(self) -> None:
        """Start an empty index file (a new segment, or a rebuild)."""
        with open(self.path, "wb"):
            pass
        self._written = 0

    def adopt_empty_file(self) -> None:
        """Use the empty file ``prepare_first_segment`` made (on another thread)."""
        self._written = 0

    def read_file(self) -> bytes | None:
        """The file's bytes, or None when missing or not a whole number of entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % self.entry_size:
            return None
        return data


class OffsetIndex(_IndexFile):
    """Sparse map from offset to file position: entries (batch last offset, batch position)."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")

    def __len__(self) -> int:
        return len(self._offsets)

    def _encode(self, start: int, end: int) -> bytes:
        pairs = array("i", bytes(8 * (end - start)))
        pairs[0::2] = self._offsets[start:end]
        pairs[1::2] = self._positions[start:end]
        return _to_big_endian(pairs)

    def load(self, log_size: int, next_offset: int | None) -> bool:
        """Read the file; False (and empty) when it is missing or fails Kafka's sanity check."""
        self.reset()
        data = self.read_file()
        if data is None:
            return False
        pairs = _from_big_endian("i", data)
        offsets, positions = pairs[0::2], pairs[1::2]
        if offsets and (
            offsets[0] < 0
            or positions[0] < 0
            or positions[-1] >= max(log_size, 1)
            or not _strictly_increasing(offsets)
            or not _strictly_increasing(positions)
        ):
            return False
        if offsets and next_offset is not None and self.base_offset + offsets[-1] >= next_offset:
            return False
        self._offsets, self._positions = offsets, positions
        self._written = len(offsets)
        return True

    def reset(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")
        self._written = 0

    def append(self, offset: int, position: int) -> None:
        self._offsets.append(offset - self.base_offset)
        self._positions.append(position)
        self._maybe_write()

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``, or (base offset, 0)."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after ``position``."""
        i = bisect_left(self._positions, position)
        del self._offsets[i:]
        del self._positions[i:]
        self._truncate_file(i)


class TimeIndex(_IndexFile):
    """Sparse map from timestamp to offset: entries (max timestamp so far, its batch's
    last offset), with strictly increasing timestamps (Kafka's ``maybeAppend``)."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps = array("q")
        self._offsets = array("i")

    def __len__(self) -> int:
        return len(self._timestamps)

    def _encode(self, start: int, end: int) -> bytes:
        timestamps = _to_big_endian(self._timestamps[start:end])
        offsets = _to_big_endian(self._offsets[start:end])
        return b"".join(
            timestamps[8 * i : 8 * i + 8] + offsets[4 * i : 4 * i + 4] for i in range(end - start)
        )

    def load(self, next_offset: int | None) -> bool:
        self.reset()
        data = self.read_file()
        if data is None:
            return False
        count = len(data) // 12
        entries = list(struct.iter_unpack(">qi", data))
        timestamps = array("q", [entry[0] for entry in entries])
        offsets = array("i", [entry[1] for entry in entries])
        if count and (
            offsets[0] < 0
            or not _strictly_increasing(timestamps)
            or not all(map(operator.le, offsets, offsets[1:]))
        ):
            return False
        if count and next_offset is not None and self.base_offset + offsets[-1] >= next_offset:
            return False
        self._timestamps, self._offsets = timestamps, offsets
        self._written = count
        return True

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._written = 0

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if not skip_full_check and self.is_full:
            return
        self._timestamps.append(timestamp)
        self._offsets.append(offset - self.base_offset)
        self._maybe_write()

    def last_entry(self) -> tuple[int, int] | None:
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def last_offset_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is < ``timestamp``: every record up to
        that offset is older than ``timestamp``. None when no entry qualifies."""
        i = bisect_left(self._timestamps, timestamp) - 1
        if i < 0:
            return None
        return self.base_offset + self._offsets[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at ``offset`` or later."""
        relative = offset - self.base_offset
        i = len(self._offsets)
        while i and self._offsets[i - 1] >= relative:
            i -= 1
        del self._timestamps[i:]
        del self._offsets[i:]
        self._truncate_file(i)
