"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``
(aborted transactions whose marker is in this segment, loaded on first use).

A segment owns its file descriptor, its size and its indexes, and answers positional
questions ("where does the batch holding offset X start", "which batches fit in N
bytes"). It knows nothing about the partition's offsets beyond its own, retention or
flushing policy: ``partition_log.py`` decides when to roll, delete or fsync.

Batch headers are read with ``os.pread`` (12 bytes to step from batch to batch, the
61-byte header where the last offset or timestamps matter). Appends are one
``os.write`` of the whole producer buffer; index bookkeeping is per batch, never per
record.

The last ``RECENT_BATCHES`` batches appended are also remembered in memory (offsets and
positions): a reader close behind the log end, as every follower and every caught-up
consumer is, finds where its batch starts (and where the high watermark cuts) without
stepping through headers from the last index entry, a 12-byte ``pread`` per batch
(at 1 KiB batches, 4 to 6 per read; a third of a leader's system calls per acks=all
message at a low rate).
"""

from __future__ import annotations

import itertools
import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

from ..protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    peek_offset_and_length,
    read_header,
    scan_batches,
)
from ..protocol.records import iter_batch_records
from .index import OffsetIndex, TimeIndex
from .open_files import OPEN_FILES
from .transaction_index import TransactionIndex

# A new segment's .log: created empty, appended to, read with pread and sendfile.
_NEW_LOG_FLAGS = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC

_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# Every LogSegment object of the process gets a serial: the cleaner's swap checks that the
# segments it copied are still the very ones in the log (not new ones at the same base).
_SERIALS = itertools.count(1)
# Recovery reads the log in chunks of this size (or one batch, if larger).
_RECOVERY_CHUNK = 4 * 1024 * 1024
# Batches appended last whose offsets and positions a segment keeps (between this many
# and twice as many): 24 bytes each, in arrays, only while it is the active segment of a
# partition appended to.
RECENT_BATCHES = 64


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until everything is written (a regular file rarely writes short)."""
    view = memoryview(data)
    written = os.write(fd, view)
    while written < len(view):
        written += os.write(fd, view[written:])


def iter_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in [start, end); the header's base offset is the
    stored one. Stops at the first header that is torn or not a v2 batch."""
    position = start
    while end - position >= HEADER_SIZE:
        data = os.pread(fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return
        header = read_header(data)
        if header.magic != 2 or header.batch_length < _MIN_BATCH_LENGTH:
            return
        if position + header.size > end:
            return
        yield position, header
        position += header.size


def scan_valid_batches(
    fd: int,
    end: int,
    *,
    verify_crc: bool,
    min_offset: int,
    on_batch: Callable[[int, BatchHeader], None],
) -> int:
    """Validate batches from position 0 and call ``on_batch(position, header)`` for each
    valid one; return the position where the valid prefix ends.

    A batch is valid when its length fits the file, its magic is 2, its CRC-32C
    matches (with ``verify_crc``) and its base offset does not go backwards.
    """
    position = 0
    buffer = b""
    buffer_start = 0
    next_offset = min_offset
    while position < end:
        relative = position - buffer_start
        if len(buffer) - relative < HEADER_SIZE:
            if end - position < HEADER_SIZE:
                break
            buffer = os.pread(fd, min(_RECOVERY_CHUNK, end - position), position)
            buffer_start, relative = position, 0
            if len(buffer) < HEADER_SIZE:
                break
        _, batch_length = peek_offset_and_length(buffer, relative)
        size = batch_length + LOG_OVERHEAD
        if batch_length < _MIN_BATCH_LENGTH or position + size > end:
            break
        if verify_crc and len(buffer) - relative < size:
            buffer = os.pread(fd, min(max(_RECOVERY_CHUNK, size), end - position), position)
            buffer_start, relative = position, 0
            if len(buffer) < size:
                break
        try:
            if verify_crc:
                header = scan_batches(memoryview(buffer)[relative : relative + size], dense=False)[
                    0
                ]
            else:
                header = read_header(buffer, relative)
                if header.magic != 2:
                    break
        except InvalidBatch:
            break
        if header.base_offset < next_offset:
            break
        on_batch(position, header)
        next_offset = header.next_offset
        position += size
    return position


class Pin:
    """Keeps a segment's descriptor open while it lives (see ``open_files.py``)."""

    __slots__ = ("segment",)

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        segment.pins += 1

    def __del__(self) -> None:
        self.segment.unpin()


class LogSegment:
    """A ``.log`` file and its indexes; positions are byte offsets in the ``.log`` file.

    The descriptor opens on first use and may be closed when idle (``OPEN_FILES``, the
    ``log.max.open.files`` bound); ``fd`` reopens it. Code that keeps the number past
    one call (a ``FileSlice``) holds a ``pin()``.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        size: int = 0,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.serial = next(_SERIALS)
        stem = f"{base_offset:020d}"
        # A suffix (".cleaned", ".swap") marks a segment the log cleaner is writing or
        # swapping in (Kafka's file suffixes; ``change_file_suffixes`` renames).
        self.log_path = directory / f"{stem}.log{file_suffix}"
        self.offset_index = OffsetIndex(
            directory / f"{stem}.index{file_suffix}", base_offset, max_index_bytes
        )
        self.time_index = TimeIndex(
            directory / f"{stem}.timeindex{file_suffix}", base_offset, max_index_bytes
        )
        self.txn_index_path = directory / f"{stem}.txnindex{file_suffix}"
        self._txn_index: TransactionIndex | None = None
        self.index_interval_bytes = index_interval_bytes
        self.size = size
        self.created_ms = created_ms
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the batch holding max_timestamp
        self.bytes_since_last_index_entry = 0
        self.indexes_loaded = False
        self._fd: int | None = None
        self.pins = 0  # live Pins: the descriptor must stay open
        # Deleted while pinned: what closes the descriptor when the last pin goes.
        self._close_when_unpinned: Callable[[int], None] | None = None
        # The batches appended last, oldest first, up to the end of the file: base and
        # last offsets, positions. Empty until this process appends; cleared whenever
        # the file is cut or re-read (``recover``).
        self._recent_bases = array("q")
        self._recent_lasts = array("q")
        self._recent_positions = array("q")

    # -- files ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        file_suffix: str = "",
        fd: int | None = None,
    ) -> LogSegment:
        """A new, empty segment: its files created here or, given ``fd`` (the open
        ``.log`` descriptor), made already by ``prepare_first_segment`` on another
        thread (then no file system call here)."""
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=created_ms,
            file_suffix=file_suffix,
        )
        if fd is None:
            fd = os.open(segment.log_path, _NEW_LOG_FLAGS, 0o644)
            segment.offset_index.create_file()
            segment.time_index.create_file()
        else:
            segment.offset_index.adopt_empty_file()
            segment.time_index.adopt_empty_file()
        segment._fd = fd
        OPEN_FILES.opened(segment)
        segment.indexes_loaded = True
        return segment

    @property
    def fd(self) -> int:
        """The ``.log`` descriptor, opened on first use; only valid until the next
        segment opens (hold a ``pin()`` to keep it longer)."""
        fd = self._fd
        if fd is None:
            fd = self._fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            OPEN_FILES.opened(self)
        else:
            OPEN_FILES.used(self)
        return fd

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def pin(self) -> Pin:
        """Keep the descriptor open for as long as the returned object lives."""
        return Pin(self)

    def unpin(self) -> None:
        self.pins -= 1
        if self.pins == 0 and self._close_when_unpinned is not None:
            fd = self.detach_fd()
            if fd is not None:
                self._close_when_unpinned(fd)

    def close_idle_fd(self) -> None:
        """Close an unpinned descriptor to stay within ``log.max.open.files``; the next
        use reopens it."""
        if self.pins == 0:
            self.close_fd()

    def close_when_unpinned(self, close: Callable[[int], None] = os.close) -> bool:
        """For a deleted segment: close the descriptor now if nothing pins it, else when
        the last pin goes; True when it is closed now. ``close`` does the closing (the
        log's, which hands it to the log manager's threads: the last close of an
        unlinked file frees its blocks and can wait seconds on a busy file system)."""
        if self.pins == 0:
            fd = self.detach_fd()
            if fd is not None:
                close(fd)
            return True
        self._close_when_unpinned = close
        return False

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's aborted transactions (``<base>.txnindex``, read on first use)."""
        index = self._txn_index
        if index is None:
            index = self._txn_index = TransactionIndex.load(self.txn_index_path)
        return index

    def write_indexes(self) -> None:
        if self.indexes_loaded:
            self.offset_index.write_pending()
            self.time_index.write_pending()

    def sync(self) -> None:
        """fsync the log and its indexes."""
        fsync_segment_files(self.fd, self.prepare_sync())

    def prepare_sync(self) -> list[Path]:
        """The event loop's part of a ``sync``: write the pending index entries (to the
        page cache) and return the index files to fsync with the ``.log``. The fsyncs
        (``fsync_segment_files``) may then run on another thread: they read no state
        of the segment's."""
        paths = []
        if self.indexes_loaded:
            self.write_indexes()
            paths += [self.offset_index.path, self.time_index.path]
        if self._txn_index is not None:
            paths.append(self._txn_index.path)
        return paths

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp in the time index
        even if the index is full (Kafka's ``onBecomeInactiveSegment``). Its recent
        batches are forgotten: only active segments keep them, so that their memory
        stays bounded by the partitions, not by the segments rolled while running."""
        self._forget_recent_batches()
        self.ensure_indexes(None)
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self.write_indexes()

    def close(self) -> None:
        self.write_indexes()
        self.close_fd()

    def close_fd(self) -> None:
        """Close the descriptor (a deleted segment's files may already be gone)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            OPEN_FILES.closed(self)

    def detach_fd(self) -> int | None:
        """Give up the descriptor without closing it: the caller closes it. A deleted
        segment's descriptor is closed on the log remover's thread, because the last
        close of an unlinked file frees its blocks and can wait seconds on a busy file
        system."""
        fd = self._fd
        if fd is not None:
            self._fd = None
            OPEN_FILES.closed(self)
        return fd

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the log and index files from suffix ``old`` to ``new`` (Kafka's
        ``LogSegment.changeFileSuffixes``); open descriptors stay valid."""
        self.write_indexes()
        for holder, attribute in (
            (self, "log_path"),
            (self.offset_index, "path"),
            (self.time_index, "path"),
        ):
            path: Path = getattr(holder, attribute)
            renamed = path.with_name(path.name.removesuffix(old) + new)
            if path.exists():
                os.replace(path, renamed)
            setattr(holder, attribute, renamed)
        renamed = self.txn_index_path.with_name(self.txn_index_path.name.removesuffix(old) + new)
        if self.txn_index_path.exists():
            os.replace(self.txn_index_path, renamed)
        self.txn_index_path = renamed
        if self._txn_index is not None:
            self._txn_index.path = renamed

    def unlink_files(self) -> None:
        """Remove the files; an open descriptor (and any FileSlice on it) stays valid."""
        unlink_all(self.file_paths())

    def file_paths(self) -> list[Path]:
        """The segment's files (those that exist or may)."""
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index_path]

    def last_modified_ms(self) -> int:
        # stat, not fstat: retention looks at every segment and must not open them all.
        fd = self._fd
        stat = os.fstat(fd) if fd is not None else os.stat(self.log_path)
        return int(stat.st_mtime * 1000)

    # -- indexes -------------------------------------------------------------------------

    def ensure_indexes(self, next_offset: int | None) -> None:
        """Load the index files on first use; rebuild them from the log if they are missing
        or fail the sanity check (``next_offset`` bounds their offsets, if known)."""
        if self.indexes_loaded:
            return
        ok = self.offset_index.load(self.size, next_offset) and self.time_index.load(next_offset)
        if ok:
            last = self.time_index.last_entry()
            if last is not None:
                self.max_timestamp, self.offset_of_max_timestamp = last
            self.indexes_loaded = True
        else:
            self.recover(verify_crc=False, min_offset=self.base_offset, truncate=False)

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        # Kafka's LogSegment.append: entry (last offset, batch position) once more than
        # index.interval.bytes were written since the previous entry.
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def recover(self, *, verify_crc: bool, min_offset: int, truncate: bool) -> int | None:
        """Rebuild both indexes by scanning the log; with ``truncate``, cut the file at the
        first invalid batch. Return the next offset after the last valid batch (None if
        the segment holds no valid batch)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.offset_index.create_file()
        self.time_index.create_file()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self._forget_recent_batches()
        next_offset: list[int] = []

        def on_batch(position: int, header: BatchHeader) -> None:
            self._index_batch(position, header.size, header.last_offset, header.max_timestamp)
            next_offset[:] = [header.next_offset]

        valid_end = scan_valid_batches(
            self.fd, self.size, verify_crc=verify_crc, min_offset=min_offset, on_batch=on_batch
        )
        if truncate and valid_end < self.size:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        if self.max_timestamp >= 0:
            # As at roll or close: the last time index entry carries the segment's max
            # timestamp, which is what a later start-up reads back.
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self.indexes_loaded = True
        self.write_indexes()
        return next_offset[0] if next_offset else None

    # -- append --------------------------------------------------------------------------

    def append(
        self,
        buffer: bytes | bytearray,
        headers: list[BatchHeader],
        first_offset: int,
        log_append_time: int,
    ) -> None:
        """Write the batches (one write) and index them; offsets already assigned."""
        position = self.size
        try:
            write_all(self.fd, buffer)
        except OSError:
            # Never leave a partial batch behind a failed write (e.g. ENOSPC).
            os.ftruncate(self.fd, position)
            raise
        offset = first_offset
        bases, lasts, positions = (
            self._recent_bases,
            self._recent_lasts,
            self._recent_positions,
        )
        for header in headers:
            last_offset = offset + header.last_offset_delta
            self._index_batch(
                position + header.position,
                header.size,
                last_offset,
                log_append_time if log_append_time >= 0 else header.max_timestamp,
            )
            offset = last_offset + 1
            # The offset as written (a follower's copied batches may leave gaps).
            base = peek_offset_and_length(buffer, header.position)[0]
            bases.append(base)
            lasts.append(base + header.last_offset_delta)
            positions.append(position + header.position)
        if len(bases) > 2 * RECENT_BATCHES:
            del bases[:-RECENT_BATCHES], lasts[:-RECENT_BATCHES], positions[:-RECENT_BATCHES]
        self.size = position + len(buffer)

    def _forget_recent_batches(self) -> None:
        del self._recent_bases[:], self._recent_lasts[:], self._recent_positions[:]

    # -- reads ---------------------------------------------------------------------------

    def _peek(self, position: int) -> tuple[int, int] | None:
        data = os.pread(self.fd, LOG_OVERHEAD, position)
        if len(data) < LOG_OVERHEAD:
            return None
        return peek_offset_and_length(data, 0)

    def batch_position(self, offset: int) -> int | None:
        """Position of the batch holding ``offset`` (the first batch ending at or after it),
        or None when the segment holds nothing at or after ``offset``."""
        bases = self._recent_bases
        if bases and offset >= bases[0]:
            # What the scan below finds: the last batch starting at or before the offset
            # (before a gap too), none past the end of the last one.
            i = bisect_right(bases, offset) - 1
            if i + 1 < len(bases) or offset <= self._recent_lasts[i]:
                return self._recent_positions[i]
            return None
        _, position = self.offset_index.lookup(offset)
        end = self.size
        previous = -1
        while position < end:
            peeked = self._peek(position)
            if peeked is None:
                break
            base_offset, batch_length = peeked
            if base_offset > offset:
                break
            previous = position
            position += batch_length + LOG_OVERHEAD
        if previous < 0:
            return position if position < end else None
        if position >= end:
            # The last batch of the segment: it holds the offset only if it reaches it.
            data = os.pread(self.fd, HEADER_SIZE, previous)
            if len(data) < HEADER_SIZE or read_header(data).last_offset < offset:
                return None
        return previous

    def read_range(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[int, int] | None:
        """(position, size) of whole batches from the one holding ``offset``: at most
        ``max_bytes`` (but one whole batch with ``min_one_batch``), only batches whose
        base offset is below ``max_offset``. None when there is nothing to send."""
        start = self.batch_position(offset)
        if start is None:
            return None
        end = self.size
        bases = self._recent_bases
        if max_offset is not None and bases and max_offset > bases[0]:
            # The first batch at or after max_offset is a recent one, or none is.
            j = bisect_left(bases, max_offset)
            if j < len(bases):
                end = self._recent_positions[j]
            if end <= start:
                return None
        elif max_offset is not None:
            _, position = self.offset_index.lookup(max_offset)
            position = max(position, start)
            while position < end:
                peeked = self._peek(position)
                if peeked is None:
                    break
                if peeked[0] >= max_offset:
                    end = position
                    break
                position += peeked[1] + LOG_OVERHEAD
            if end <= start:
                return None
        if end - start > max_bytes:
            limit = start + max(max_bytes, 0)
            boundary = max(self.offset_index.floor_position(limit), start)
            while True:
                peeked = self._peek(boundary)
                if peeked is None:
                    break
                following = boundary + peeked[1] + LOG_OVERHEAD
                if following > limit:
                    break
                boundary = following
            if boundary == start:
                if not min_one_batch:
                    return None
                peeked = self._peek(start)
                if peeked is None:
                    return None
                boundary = start + peeked[1] + LOG_OVERHEAD
            end = min(end, boundary)
        return start, end - start

    def read_batch(self, position: int, size: int) -> tuple[bytes, BatchHeader]:
        data = os.pread(self.fd, size, position)
        return data, read_header(data)

    def find_offset_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` whose
        timestamp is >= ``timestamp``."""
        before = self.time_index.last_offset_before(timestamp)
        from_offset = max(min_offset, before if before is not None else self.base_offset)
        _, position = self.offset_index.lookup(from_offset)
        for batch_position, header in iter_headers(self.fd, position, self.size):
            if header.last_offset < from_offset or header.max_timestamp < timestamp:
                continue
            data, batch = self.read_batch(batch_position, header.size)
            if batch.uses_log_append_time:
                return max(batch.base_offset, min_offset), batch.max_timestamp
            for record in iter_batch_records(data, batch):
                record_offset = batch.base_offset + record.offset_delta
                record_timestamp = batch.base_timestamp + record.timestamp_delta
                if record_timestamp >= timestamp and record_offset >= min_offset:
                    return record_offset, record_timestamp
        return None

    def max_timestamp_record(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the segment's max timestamp."""
        if self.max_timestamp < 0:
            return None
        target = self.offset_of_max_timestamp
        _, position = self.offset_index.lookup(target)
        for batch_position, header in iter_headers(self.fd, position, self.size):
            if header.last_offset < target:
                continue
            data, batch = self.read_batch(batch_position, header.size)
            if batch.uses_log_append_time:
                return batch.base_offset, batch.max_timestamp
            for record in iter_batch_records(data, batch):
                if batch.base_timestamp + record.timestamp_delta == batch.max_timestamp:
                    return batch.base_offset + record.offset_delta, batch.max_timestamp
            return batch.last_offset, batch.max_timestamp
        return None

    def next_offset_from_index(self) -> int | None:
        """Next offset after the last batch, scanning from the last index entry; None when
        the segment is empty or its tail does not parse (then it needs recovery)."""
        last: BatchHeader | None = None
        end_position = self.offset_index.last_position()
        for position, header in iter_headers(self.fd, self.offset_index.last_position(), self.size):
            last = header
            end_position = position + header.size
        if last is None or end_position != self.size:
            return None
        return last.next_offset

    def truncate_to(self, offset: int) -> int | None:
        """Drop the batch holding ``offset`` and everything after; rebuild the indexes.
        Return the next offset of what remains (None if nothing remains)."""
        position = self.batch_position(offset)
        if position is not None and position < self.size:
            os.ftruncate(self.fd, position)
            self.size = position
        self.txn_index.truncate_to(offset)
        return self.recover(verify_crc=False, min_offset=self.base_offset, truncate=True)


def fsync_segment_files(fd: int, paths: list[Path]) -> None:
    """fsync a segment's ``.log`` (its descriptor, which the caller keeps open) and then
    the files ``paths`` (its indexes), on any thread. A file that is gone was deleted
    meanwhile (retention, truncation, the partition's deletion): nothing to make
    durable. They are opened read-only, never created: a deleted index must not come
    back."""
    os.fsync(fd)
    for path in paths:
        try:
            index_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            os.fsync(index_fd)
        finally:
            os.close(index_fd)


def unlink_all(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def prepare_first_segment(directory: Path) -> int | None:
    """Make a new partition's directory and its first segment's files (``.log``,
    ``.index``, ``.timeindex`` at offset 0) for ``LogSegment.create``: the open ``.log``
    descriptor, or None when the directory already exists (the log is then loaded from
    it). Runs on the log manager's threads: a mkdir and three file creations each wait
    on the file system's journal, for seconds under heavy disk I/O."""
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        return None
    stem = f"{0:020d}"
    for suffix in (".index", ".timeindex"):
        with open(directory / f"{stem}{suffix}", "wb"):
            pass
    return os.open(directory / f"{stem}.log", _NEW_LOG_FLAGS, 0o644)
